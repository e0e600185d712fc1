"""The app's screens: main, run dashboard, help."""
