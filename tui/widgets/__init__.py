"""The app's widgets: one pane or drawing each."""
