"""The page frame: the sidebar and navigation, the page boundary, the chart element, once-per-process set-up."""
