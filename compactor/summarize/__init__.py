"""Summaries of a lifted state: the offline structured renderer, the model summarizer's prompt,
the completion of model text from the state, and budget repairs."""
