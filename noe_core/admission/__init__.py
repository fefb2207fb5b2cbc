"""AdmissionReview in, one decision, AdmissionReview out."""
