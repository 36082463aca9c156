"""The chaos simulation: the real services and store under injected faults, in simulated time.

``run_chaos(ChaosConfig(seed=...))`` returns a ``ChaosReport``; ``jobsched chaos`` is its CLI.
Everything is reproducible from the seed. See docs/chaos.md.
"""

from jobsched_tools.sim.report import ChaosReport
from jobsched_tools.sim.scenario import ChaosConfig, FaultRates
from jobsched_tools.sim.world import run_chaos

# The names the CLI, the scripts and the tests import from the package.
__all__ = ["ChaosConfig", "ChaosReport", "FaultRates", "run_chaos"]
