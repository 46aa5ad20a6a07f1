"""Timings in, scores out: the timing files' readers (timings/), recording an
iteration (record), a new round pooled (remeasure), corrections, intake, the template
of a new experiment, the environment, the noise simulation. Imports the packages below
agents, and agents.
"""
