"""One cache module per page family: the runs a page shows, keyed on settings and admitted through the gate."""
