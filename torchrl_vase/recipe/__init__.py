"""The parts of ``recipes/trpo_vase.py``: its config's schema and checks (``config``), the
and the loop's parts built from a config (``assembly``).

The top layer of the library, and the only one that reads a Hydra config; it lives in the
package (not beside the script) so that launchers running the recipe's jobs in other processes
(submitit) import it like any installed module."""
