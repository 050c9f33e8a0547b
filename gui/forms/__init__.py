"""The plan's input forms. Each form edits one part of the Plan through the controller."""
