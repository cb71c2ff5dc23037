# SPDX-License-Identifier: MIT
"""The dispatcher level from Python: problems, validation errors with the rule's text,
plans, explain, kernel sets, the registry export, build info and build."""
import numpy as np
import pytest

import fmha


def fwd_problem(dtype="fp32", d=32, sq=8):
    p = fmha.Problem(family="fwd", batch=2, num_heads_q=4, num_heads_kv=2, seqlen_q=sq, seqlen_kv=16, head_dim_qk=d,
                     head_dim_v=d)
    p.tensor("q", dtype, (2, sq, 4, d)).tensor("k", dtype, (2, 16, 2, d))
    p.tensor("v", dtype, (2, 16, 2, d)).tensor("o", dtype, (2, sq, 4, d))
    return p


def test_version_and_build_info():
    assert fmha.__version__.split(".")[:2] == fmha.LIBRARY_VERSION.split(".")[:2]
    info = fmha.build_info()
    assert "backends" in info and "cpu" in info["backends"]


def test_build_info_parses_and_context_failures_say_why():
    info = fmha.build_info()
    assert info["version"] == fmha.LIBRARY_VERSION and info["nvrtc"] in ("on", "off")
    assert info["cuda"] in ("on", "off") and (info["cuda"] == "on") == ("cuda_off" not in info)
    with pytest.raises(fmha.FmhaError) as e:
        fmha.Context(arch="sm75")
    assert 'arch "sm75" is not a GPU arch fmha has kernels for; expected one of sm80, sm86, sm89, sm90' in str(e.value)
    with pytest.raises(fmha.FmhaError) as e:
        fmha.Context(arch="sm90", sm_count=-2)
    assert "sm_count is -2" in str(e.value)
    if info["cuda"] == "off":
        with pytest.raises(fmha.FmhaError) as e:
            fmha.Context("cuda")
        assert "the CUDA backend is unavailable: " + info["cuda_off"] in str(e.value)


def test_problem_validation_errors_carry_the_rule():
    p = fmha.Problem(family="fwd", batch=2)
    with pytest.raises(fmha.InvalidProblemError) as e:
        p.validate()
    assert e.value.status == "INVALID_PROBLEM" and "[rule dims.positive]" in e.value.message
    with pytest.raises(fmha.InvalidProblemError, match="OUT_OF_RANGE"):
        p.set(dropout_p=1.5)
    with pytest.raises(ValueError, match="unknown parameter"):
        p.set(bogus=1)
    p = fwd_problem()
    p.set(mask="b:4,0", softcap=10.0)
    assert p.get("window_left") == 4 and p.get("softcap") == 10.0
    p.validate()
    p.tensor("k", "fp32", (2, 16, 3, 32))
    with pytest.raises(fmha.InvalidProblemError, match=r"\[rule tensor.shape\] tensor k"):
        p.validate()


def test_plan_execute_describe_explain():
    ctx = fmha.Context("cpu")
    p = fwd_problem()
    plan = ctx.plan(p)
    assert plan.kernels() == ["cpu_ref_fwd"]
    assert "family fwd" in plan.describe()
    q, k, v = (np.random.default_rng(0).uniform(-1, 1, s).astype(np.float32)
               for s in ((2, 8, 4, 32), (2, 16, 2, 32), (2, 16, 2, 32)))
    o = np.empty((2, 8, 4, 32), np.float32)
    ws = np.empty(plan.workspace_size + 1, np.uint8)
    plan.execute({"q": q.ctypes.data, "k": k.ctypes.data, "v": v.ctypes.data, "o": o.ctypes.data}, ws.ctypes.data,
                 plan.workspace_size)
    assert np.abs(o - fmha.attention(q, k, v)).max() == 0
    with pytest.raises(fmha.FmhaError, match="no pointer for tensor o"):
        plan.execute({"q": q.ctypes.data, "k": k.ctypes.data, "v": v.ctypes.data}, ws.ctypes.data, plan.workspace_size)
    text = ctx.explain(p)
    assert "chosen: cpu_ref_fwd" in text
    virt = fmha.Context(arch="sm90")
    assert "chosen: fmha_fwd_bf16_hq64_hv64" in virt.explain(fwd_problem("bf16", 64, sq=40))
    with pytest.raises(fmha.FmhaError, match="kernel fmha_fwd_bf16_hq64_hv64.* was selected .* cannot run it"):
        virt.plan(fwd_problem("bf16", 64, sq=40))  # a virtual GPU runs nothing, so it plans nothing
    routed = virt.explain(fwd_problem("bf16", 64))  # 8 query rows x a GQA group of 2: decode-shaped
    assert "planned as fwd_splitkv" in routed and "chosen: fmha_splitkv_bf16_hq64_hv64" in routed
    with pytest.raises(fmha.NotSupportedError) as e:
        virt.explain(fwd_problem())  # fp32 has no GPU kernel
    assert "stage" in e.value.explain


def test_kernel_sets_and_registry():
    names = fmha.enumerate_kernels("sm90", "default", "family==fwd && hdim_qk==128 && dtype==bf16")
    assert names and all(n.startswith("fmha_fwd_bf16_hq128") for n in names)
    ks = fmha.KernelSet("sm80", "all")
    assert len(ks) > 100 and "bwddqdkdv" in set(ks.families())
    with pytest.raises(fmha.FmhaError, match="receipt 'nope' is unknown"):
        fmha.KernelSet("sm80", "nope")
    reg = fmha.Context("cpu").kernels(with_stats=True)
    assert "cpu_ref_bwd_dq_dk_dv" in [k["name"] for k in reg["kernels"]]


def test_build_reports_progress_or_why_not():
    seen = []
    try:
        res = fmha.build("sm80", "default", "family==fwd && hdim_qk==64 && dtype==fp16 && mask==causal && lse==0",
                         threads=1, progress=lambda *a: seen.append(a))
    except fmha.NotCompiledError as e:  # no NVRTC on this machine: the message says so
        assert "NVRTC" in e.message or "nvrtc" in e.message
        return
    assert res["failed"] == 0 and res["compiled"] + res["cached"] >= 1
    assert seen and seen[-1][0] == seen[-1][1]
    # the same kernel by name: now cached
    name = fmha.KernelSet("sm80", "default", "family==fwd && hdim_qk==64 && dtype==fp16 && mask==causal && lse==0")
    res = fmha.build(None, names=name.names(), threads=1, progress=False)
    assert res == {"compiled": 0, "cached": len(name), "skipped": 0, "failed": 0}
    with pytest.raises(fmha.FmhaError, match="kernel name 'fmha_nope'"):
        fmha.build(None, names=["fmha_nope"], progress=False)
