"""Small pure helpers the rest of noe_core shares."""
