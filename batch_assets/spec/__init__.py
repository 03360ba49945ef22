"""Task specs: one YAML file (+ a versioned prompt template and output schema) per task."""
