"""Forecasters that turn job features and traffic history into durations, GPU counts and demand curves."""
