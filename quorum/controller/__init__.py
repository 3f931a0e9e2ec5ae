"""The metadata controller: records, image, placement, election and the admin API."""
