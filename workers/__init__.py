"""Worker processes, settings and the embedded dev stack (Temporal dev server, moto S3)."""
