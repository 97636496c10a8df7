"""Side effects of compaction, grouped by the dependency they hold; clients injected."""
