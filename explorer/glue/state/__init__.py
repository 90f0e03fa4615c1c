"""The settings: parsed from the URL and the widgets with one strict parser, reconciled, written back."""
