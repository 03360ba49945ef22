"""What a platform team deploys: checks of the deploy/ folder's Dagster instance files."""
