"""What the pages run: settings in, module and trace out, one function per kind of run; no UI in it."""
