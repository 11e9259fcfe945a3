"""What the user declares: the :class:`~.declare.Suite`, its tasks, the cases they expand to, the rules
that score transcripts, and the tools an agent may call."""
