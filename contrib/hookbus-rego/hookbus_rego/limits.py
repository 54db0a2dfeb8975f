"""The bounds of a Rego hook: how big a policy, how many evaluations at once, how deep."""

from __future__ import annotations

#: A bigger policy file is refused. rego-cpp's parser takes time that grows faster than the
#: policy (here: 10 KiB of rules 0.1 s, 90 KiB 1.3 s), and a load waits for it.
MAX_POLICY_BYTES = 128 * 1024


#: Evaluations of one hook's policy at once, each on an interpreter of its own. Those given
#: up on at their deadline count until they end; a fire that finds them all busy waits for
#: one until its own deadline.
MAX_EVALUATIONS = 8


#: How deep the envelope's containers and the policy's brackets may nest. rego-cpp recurses
#: once per level, in its compiler and in its evaluation, and a few thousand levels
#: overflow a thread's stack, which kills the whole process (5,000 did here, with 8 MB
#: stacks; other systems give threads less). Deeper containers of the envelope reach the
#: policy as ``hookbus.deepjson.CUT``; a deeper policy is refused.
MAX_DEPTH = 128

