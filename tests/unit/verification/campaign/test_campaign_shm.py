"""A campaign's /dev/shm judged in bytes and entries against the room it eats
(ftqual.verification.campaign.shm): the
projection to the horizon, the leftovers records it reads (old ones with names only included), the check's
verdict and the report's finding."""

from __future__ import annotations

import json

import pytest

from ftqual.scenario import campaign_plan, campaign_setup
from ftqual.verification.campaign import shm
from ftqual.verification.campaign.text import human_bytes, leak_lines, shm_leaks
from ftqual.verification.evidence.leftovers import read_leftovers
from ftqual.verification.evidence.model import Ref

MiB, GiB = 1 << 20, 1 << 30
EARLIER = {1040: (0, 0), 1305: (1, 0), 1570: (2, 1)}


def at(cycle, names, entry_bytes=4096, free=60 * GiB, inodes=1 << 27, free_inodes=1 << 26, sized=True):
    """One host's /dev/shm at a cycle start: `names`, each `entry_bytes` allocated."""
    if not sized:
        return shm.Point(
            cycle, tuple(names), len(names), *(None,) * 7, Ref(f"leftovers/h.cycle{cycle}.json"), {}
        )
    sizes = {n: (entry_bytes, entry_bytes) for n in names}
    total = entry_bytes * len(names)
    ref = Ref(f"leftovers/h.cycle{cycle}.json")
    return shm.Point(
        cycle,
        tuple(names),
        len(names),
        total,
        total,
        sizes,
        free,
        free_inodes,
        inodes,
        64 * GiB,
        ref,
        EARLIER,
    )


BASE = ["nccl-host"]
LEAKED = ["sem.loky-1040-a", "sem.loky-1040-b", "torch_1305_99_0", "cuda.shm.0.622.1"]  # 0x622 = 1570


def test_a_bytes_small_leak_fits_the_horizon_and_names_its_families_and_creators():
    p = shm.project("h", at(1, BASE), at(5, BASE + LEAKED), 1000)
    assert (p.faults, p.new_entries, p.entries_per_fault, p.bytes_per_fault) == (4, 4, 1.0, 4096.0)
    assert p.leaks and p.known and p.within_horizon is False
    assert p.faults_until_full == 60 * GiB // 4096 and p.full_by == "space"
    fams = {f["family"]: f for f in p.families}
    assert fams["sem.loky-*"]["entries"] == 2 and fams["sem.loky-*"]["ranks"] == [0]
    assert fams["cuda.shm.*"]["ranks"] == [1]  # the pid in hex
    assert p.of_dead == 4
    text = shm.describe(p)
    assert "1 entries and 4.0 KiB allocated per fault over 4 faults" in text
    assert "faults until full 15,728,640 (by space)" in text


def test_a_leak_that_fills_a_small_dev_shm_within_the_horizon_is_full():
    p = shm.project(
        "h", at(1, BASE, free=8 * MiB), at(5, BASE + LEAKED, entry_bytes=1 * MiB, free=8 * MiB), 1000
    )
    # 4 new entries of 1 MiB over 4 faults, and the first sample's entry grew from 4 KiB to 1 MiB
    assert p.bytes_per_fault == pytest.approx((5 * MiB - 4096) / 4, abs=0.1)
    assert p.within_horizon is True and p.full_by == "space" and p.faults_until_full == 6
    assert "faults until full 6 (by space)" in shm.describe(p)


def test_a_leak_of_empty_entries_runs_out_of_inodes():
    many = [f"sem.x-{i}" for i in range(400)]
    first, last = at(1, BASE, entry_bytes=0, inodes=2000, free_inodes=1500), at(5, BASE + many, entry_bytes=0)
    last = shm.Point(**{**last.__dict__, "inodes": 2000, "free_inodes": 1100})
    p = shm.project("h", first, last, 1000)
    assert p.bytes_per_fault == 0 and p.faults_until_full_space is None
    assert (p.entries_per_fault, p.faults_until_full, p.full_by, p.within_horizon) == (
        100.0,
        11,
        "inodes",
        True,
    )


def test_no_inode_limit_and_no_byte_growth_never_fills():
    first = at(1, BASE, entry_bytes=0, inodes=0, free_inodes=0)
    last = at(5, BASE + LEAKED, entry_bytes=0, inodes=0, free_inodes=0)
    p = shm.project("h", first, last, 1000)
    assert p.leaks and p.faults_until_full is None and p.within_horizon is False
    assert "no inode limit" in shm.describe(p) and "never at this rate" in shm.describe(p)


def test_names_only_cannot_tell_the_room():
    p = shm.project("h", at(1, BASE, sized=False), at(5, BASE + LEAKED, sized=False), 1000)
    assert p.leaks and not p.known and p.within_horizon is None and p.bytes_per_fault is None


def test_the_negative_control_nothing_grows():
    p = shm.project("h", at(1, BASE + LEAKED), at(9, BASE + LEAKED), 1000)
    assert not p.leaks and p.new_entries == 0 and p.within_horizon is False and p.faults_until_full is None


def test_shrinking_is_not_a_leak():
    p = shm.project("h", at(1, BASE + LEAKED), at(3, BASE), 1000)
    assert not p.leaks and p.entries_per_fault < 0


def test_families():
    assert shm.shm_family("torch_1040_2992804948_0") == "torch_*"
    assert shm.shm_family("sem.loky-1040-13h3") == "sem.loky-*"
    assert shm.shm_family("cuda.shm.0.2b3.1") == "cuda.shm.*"
    assert shm.shm_family("plain") == "plain"


def record(cycle: int, **extra) -> dict:
    base = {"schema": "ftqual.leftovers/v1", "host": "h", "cycle": cycle, "earlier": [], "alive": []}
    return {**base, "gpu": {"sampled": False, "error": "none"}, "unreadable_pid_records": [], **extra}


def write(run, cycle, data):
    (run / "leftovers").mkdir(exist_ok=True)
    (run / "leftovers" / f"h.cycle{cycle}.json").write_text(json.dumps(data))


SAMPLE = {
    "path": "/dev/shm",
    "error": None,
    "entries": [{"name": "torch_1_2_0", "size": 100, "allocated": 4096}],
    "count": 1,
    "size_bytes": 100,
    "allocated_bytes": 4096,
    "fs": {"size_bytes": 64 * MiB, "free_bytes": 32 * MiB, "inodes": 1000, "free_inodes": 900},
    "fs_error": None,
}


def test_the_reader_keeps_sizes_and_room_and_reads_old_records_with_names_only(tmp_path):
    write(tmp_path, 1, record(1, shm_segments=["a", "b"]))  # before sizes were kept
    write(tmp_path, 2, record(2, shm_segments=["torch_1_2_0"], shm=SAMPLE))
    write(tmp_path, 3, record(3, shm_segments=["x"], shm={**SAMPLE, "count": "many"}))
    leftovers, status = read_leftovers(tmp_path)
    assert status.complete
    old, new, garbled = (leftovers.records[("h", c)] for c in (1, 2, 3))
    assert old.shm is None and old.shm_segments == ("a", "b") and old.error is None
    assert new.shm.entries == (("torch_1_2_0", 100, 4096),) and new.shm.allocated_bytes == 4096
    assert new.shm.fs.free_bytes == 32 * MiB and new.shm.fs.free_inodes == 900
    assert garbled.error is None and "garbled" in garbled.shm.error  # the rest of the record still counts
    assert shm.point(old).allocated_bytes is None and shm.point(new).free_bytes == 32 * MiB
    assert shm.point(garbled).allocated_bytes is None  # falls back to the names


def test_the_horizon_reaches_the_plan_and_older_plans_default_to_1000(tmp_path):
    env = {"NVRX_CAMPAIGN_FAULTS": "3", "NVRX_CAMPAIGN_SEED": "1", "NVRX_CAMPAIGN_HORIZON": "250"}
    plan = campaign_setup.plan_from_env(env, "smoke", 2, 2)
    assert plan.horizon_faults == 250
    path = campaign_plan.write(plan, tmp_path)
    assert campaign_plan.read(tmp_path).horizon_faults == 250
    data = json.loads(path.read_text())
    del data["horizon_faults"]
    path.write_text(json.dumps(data))
    assert campaign_plan.read(tmp_path).horizon_faults == 1000
    assert campaign_setup.plan_from_env({"NVRX_CAMPAIGN_FAULTS": "3"}, "smoke", 2, 2).horizon_faults == 1000
    with pytest.raises(campaign_plan.PlanError, match="NVRX_CAMPAIGN_HORIZON"):
        campaign_setup.plan_from_env({**env, "NVRX_CAMPAIGN_HORIZON": "0"}, "smoke", 2, 2)


def test_the_config_s_horizon_reaches_the_launcher_only_when_set():
    from ftqual.scenario.model import _campaign_options

    assert "NVRX_CAMPAIGN_HORIZON" not in _campaign_options({"faults": 3}).env()  # the key stays
    assert _campaign_options({"faults": 3, "horizon_faults": 50}).env()["NVRX_CAMPAIGN_HORIZON"] == "50"


def test_the_report_names_the_leak_as_a_finding_or_the_fail():
    fits = shm.project("h", at(1, BASE), at(5, BASE + LEAKED), 1000)
    full = shm.project("h", at(1, BASE, free=MiB), at(5, BASE + LEAKED, free=MiB), 1000)
    quiet = shm.project("h", at(1, BASE), at(5, BASE), 1000)
    values = {"shm": {"horizon_faults": 1000, "hosts": [fits.as_dict(), full.as_dict(), quiet.as_dict()]}}
    leaks = shm_leaks(values)
    assert [leak["judged"] for leak in leaks] == ["fits", "full"]  # nothing grew on the third: no line
    first, second = leak_lines(leaks)
    assert "1 entries and 4.0 KiB per fault" in first and "sem.loky-* 2 (8.0 KiB)" in first
    assert "from 1 dead process(es) of rank 0" in first
    assert "a finding, not a failure: beyond the horizon of 1,000 faults" in first
    assert "faults until full 256 (by space)" in second and "❌ FAIL: within the horizon" in second
    assert (
        shm_leaks({}) == []
        and shm_leaks({"shm": {"hosts": ["junk", {"leaks": True}]}})[0]["judged"] == "unknown"
    )


def test_human_bytes():
    assert [human_bytes(v) for v in (0, 1023, 1536, 5 * MiB, 3 * GiB)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]
    assert human_bytes(None) == "-" and human_bytes(True) == "-"


def test_summary_md_shows_the_leak_of_a_passing_campaign(tmp_path):
    from ftqual.report.markdown import render_markdown
    from tests.unit.report.conftest import DATA
    from tests.unit.report.test_campaign_report import summary_of

    doc = json.loads((DATA / "campaign.verify.json").read_text())
    check = next(c for c in doc["checks"] if c["id"] == "cycles_do_not_accumulate")
    fits = shm.project("h", at(1, BASE), at(5, BASE + LEAKED), 1000)
    check.setdefault("values", {})["shm"] = {"horizon_faults": 1000, "hosts": [fits.as_dict()]}
    summary = summary_of(tmp_path, doc)  # validated against the summary's schema
    assert summary["verdict"] == "pass"
    (leak,) = summary["campaigns"]["campaign"]["shm_leaks"]
    assert leak["judged"] == "fits" and leak["bytes_per_fault"] == 4096.0
    text = render_markdown(summary)
    assert "- /dev/shm leak on h (cycles 1 to 5): 1 entries and 4.0 KiB per fault" in text
    assert "| /dev/shm | /dev/shm bytes | /dev/shm free | agent fds |" in text


def test_campaign_horizon_faults_validates_and_reaches_the_launcher():
    from snakemake.utils import validate

    from ftqual.scenario.model import launcher_env, resolve
    from tests.unit.scenario.test_fault_catalog import SCHEMA, merged

    config = merged(
        "config.yaml",
        "campaign.yaml",
        override={"scenarios": {"campaign": {"campaign": {"horizon_faults": 200}}}},
    )
    validate(config, SCHEMA)
    cfg = resolve(config, env={})
    s = cfg.by_name["campaign"]
    assert s.campaign.horizon_faults == 200 and launcher_env(cfg, s)["NVRX_CAMPAIGN_HORIZON"] == "200"
    bad = merged(
        "config.yaml",
        "campaign.yaml",
        override={"scenarios": {"campaign": {"campaign": {"horizon_faults": 0}}}},
    )
    with pytest.raises(Exception, match="horizon_faults|minimum"):
        validate(bad, SCHEMA)
