"""Storage: Arrow schemas, the filesystem layer (local and S3), run layout, judgment cache, importers."""
