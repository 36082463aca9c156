"""An executable model of shape f, the successor claim (docs/proposals/fewer-write-units.md), and
its exhaustive exploration: the writes (``writes.py``), the actors (``model.py``), the world they
act in (``world.py``), the invariants (``invariants.py``), the sets (``sets.py``) and the search
(``search.py``). ``python -m jobsched_tools.successor`` prints the figures."""
