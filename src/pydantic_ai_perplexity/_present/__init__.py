"""Presentation: the text a model reads and what a person sees (terminal and notebook display)."""
