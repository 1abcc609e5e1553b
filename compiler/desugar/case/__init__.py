"""The legacy `case:` block of a step -> arcs, task policy rules and task chains.

`block.py` is the rewrite (its entry point `run`, the `case` pass); `rules.py` reads a rule's
condition, event and actions; `next_action.py` the `next` action, standalone `else` rules and
the rule keys without a canonical meaning; `router.py` builds the step's router. The task
chains a rule runs after a call (`../chains.py`) and the re-invocation of a call
(`../recall.py`) are shared with the `retry` rewrite, so they stay beside it.
"""
