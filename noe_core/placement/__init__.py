"""The placement contract (docs/placement.md): its rules and the parts they are built from."""
