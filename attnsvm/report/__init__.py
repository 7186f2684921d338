"""What a run shows: figures, their captions and the report's text."""
