"""The fixture project is data for the end-to-end tests, not part of this suite."""

collect_ignore = ["fixtures"]
