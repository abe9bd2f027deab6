//! An upgrade never splits a pick: commits a release before `shared`
//! scanners keyed in the form without the gateway (`v1`) are still twins
//! of reads keyed in today's form (`v2`, the scanner's gateway in it), and
//! scans such a release stored but did not decide are keyed again. On
//! real SQLite files, through the gate the daemon uses
//! (`Gate::bridge_earlier_keys`), embedded and through a facility
//! redis-server; the fixtures' upgrade tests do the same with states each
//! earlier release's own binary wrote.

use crate::util::*;
use scangate::capture::{Profile, Scan};
use scangate::config::Config;
use scangate::gate::earlier_keys::Bridge;
use scangate::gate::{Gate, GateConfig};
use scangate::model::Verdict;
use scangate::store::Store;
use std::path::Path;

/// This gateway's config: `counter-1`, not shared (its keys name `test-gw`).
fn config(state: &Path) -> Config {
    Config::parse(
        &format!(
            "[gateway]\nfacility = \"test-pharmacy\"\nid = \"test-gw\"\nstate_dir = {:?}\n\
             [[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\n",
            state.display().to_string()
        ),
        None,
    )
    .unwrap()
}

/// `counter-1` as the release before `shared` keyed it (no owner: `v1`).
fn before_upgrade() -> Profile {
    dispense("counter-1")
}

/// `counter-1` as this release keys it.
fn after_upgrade() -> Profile {
    let mut p = dispense("counter-1");
    p.owner = Some("test-gw".into());
    p
}

fn at(profile: &Profile, label: &str, t0: i64, after_ms: i64) -> Scan {
    scan(
        profile,
        label,
        capture_time(t0 + after_ms, "boot-a", 1_000_000 + after_ms, true),
    )
}

fn submit(store: &mut Store, gate: &mut Gate, scans: &[Scan]) -> Vec<Verdict> {
    scangate::daemon::embedded::submit(store, gate, scans)
        .unwrap()
        .into_iter()
        .map(|d| d.verdict)
        .collect()
}

/// A state the earlier release wrote: `label` committed at t0 in the `v1`
/// form; then the gate of this release, bridged or not.
fn upgraded(dir: &Path, label: &str, t0: i64, bridged: bool) -> (Store, Gate, Scan) {
    let mut store = Store::open(dir).unwrap();
    let first = at(&before_upgrade(), label, t0, 0);
    let mut old_gate = test_gate(&store);
    assert_eq!(
        submit(&mut store, &mut old_gate, std::slice::from_ref(&first)),
        [Verdict::Committed]
    );
    let cfg = config(dir);
    let mut gate = Gate::new(GateConfig::from_config(&cfg), &store).unwrap();
    if bridged {
        gate.bridge_earlier_keys(&mut store, &cfg).unwrap();
    }
    (store, gate, first)
}

#[test]
fn a_read_straddling_the_upgrade_is_an_echo_of_the_commit_before_it() {
    let t0 = chrono::Utc::now().timestamp_millis() - 10_000;
    let d = tempdir("scangate-keys-");
    let (mut store, mut gate, first) = upgraded(d.path(), &dscsa("S1"), t0, true);
    let again = at(&after_upgrade(), &dscsa("S1"), t0, 2_000);
    let other = at(&after_upgrade(), &dscsa("S2"), t0, 2_500);
    assert_ne!(
        again.content_key("test-pharmacy"),
        first.content_key("test-pharmacy"),
        "the two forms differ"
    );
    assert_eq!(
        submit(&mut store, &mut gate, &[again, other]),
        [
            Verdict::Suppressed {
                twin: first.uuid.to_string()
            },
            Verdict::Committed
        ]
    );
    // Outside the window it is a new pick, as for any label.
    let later = at(&after_upgrade(), &dscsa("S1"), t0, 3_500);
    assert_eq!(
        submit(&mut store, &mut gate, &[later]),
        [Verdict::Committed]
    );

    // Control: without the bridge the same read is a second entry — the
    // fault the bridge is there for.
    let d = tempdir("scangate-keys-");
    let (mut store, mut gate, _) = upgraded(d.path(), &dscsa("S1"), t0, false);
    let again = at(&after_upgrade(), &dscsa("S1"), t0, 2_000);
    assert_eq!(
        submit(&mut store, &mut gate, &[again]),
        [Verdict::Committed]
    );
}

#[test]
fn a_scan_stored_but_undecided_before_the_upgrade_is_keyed_again_and_decided_once() {
    let t0 = chrono::Utc::now().timestamp_millis() - 10_000;
    let d = tempdir("scangate-keys-");
    let mut store = Store::open(d.path()).unwrap();
    // Stored (and ACKed) by the earlier release, not decided yet: the
    // facility store did not answer before the upgrade.
    let stored = at(&before_upgrade(), &dscsa("P1"), t0, 0);
    {
        let w = store.write().unwrap();
        scangate::outbox::insert(&w, "test-pharmacy", std::slice::from_ref(&stored)).unwrap();
        w.commit().unwrap();
    }
    let cfg = config(d.path());
    let mut gate = Gate::new(GateConfig::from_config(&cfg), &store).unwrap();
    gate.bridge_earlier_keys(&mut store, &cfg).unwrap();
    let resent = at(&after_upgrade(), &dscsa("P1"), t0, 1_000);
    let key: Vec<u8> = open_db(d.path())
        .query_row("SELECT content_key FROM scans", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        hex::encode(key),
        resent.content_key("test-pharmacy").unwrap(),
        "the pending scan carries today's key"
    );
    let decided = scangate::daemon::embedded::decide_pending(&mut store, &mut gate).unwrap();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].verdict, Verdict::Committed);
    assert_eq!(
        submit(&mut store, &mut gate, &[resent]),
        [Verdict::Suppressed {
            twin: stored.uuid.to_string()
        }]
    );
}

#[test]
fn the_bridge_is_there_only_while_earlier_commits_can_be_twins() {
    let t0 = chrono::Utc::now().timestamp_millis() - 10_000;
    let d = tempdir("scangate-keys-");
    let (mut store, _, _) = upgraded(d.path(), &dscsa("S1"), t0, false);
    let cfg = config(d.path());
    let retention = cfg.retention().as_millis() as i64;
    let bridge = Bridge::prepare(&mut store, &cfg, t0 + 1_000)
        .unwrap()
        .unwrap();
    assert_eq!(bridge.until_ms(), t0 + retention);
    // A retention past the newest earlier-form commit: nothing to bridge.
    assert!(
        Bridge::prepare(&mut store, &cfg, t0 + retention + 1)
            .unwrap()
            .is_none()
    );
    // A state of today's keys only needs none.
    let d = tempdir("scangate-keys-");
    let mut store = Store::open(d.path()).unwrap();
    let mut gate = Gate::new(GateConfig::from_config(&config(d.path())), &store).unwrap();
    submit(
        &mut store,
        &mut gate,
        &[at(&after_upgrade(), &dscsa("N1"), t0, 0)],
    );
    assert!(
        Bridge::prepare(&mut store, &config(d.path()), t0 + 1)
            .unwrap()
            .is_none()
    );
    // A scanner declared shared keeps the v1 form: nothing to bridge.
    let d = tempdir("scangate-keys-");
    let (mut store, _, _) = upgraded(d.path(), &dscsa("S1"), t0, false);
    let text = "[gateway]\nfacility = \"test-pharmacy\"\nid = \"test-gw\"\n\
         [[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\nshared = true\n";
    let shared = Config::parse(text, None).unwrap();
    assert!(
        Bridge::prepare(&mut store, &shared, t0 + 1)
            .unwrap()
            .is_none()
    );
}

/// With a facility store: the gateway's own commit of the earlier form,
/// made through the facility before the upgrade, is found by its local
/// echo check after it, and the re-read is never claimed again.
#[test]
fn through_a_facility_store_a_read_straddling_the_upgrade_is_an_echo_too() {
    let now = scangate::capture::CaptureTime::now();
    for bridged in [true, false] {
        let (root, redis, mut store, mut gate, mut facility) = facility_rig("scangate-keys-fac-");
        let t0 = chrono::Utc::now().timestamp_millis() - 10_000;
        let first = at(&before_upgrade(), &dscsa("F1"), t0, 0);
        store.admit("f1", std::slice::from_ref(&first)).unwrap();
        scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
        assert_eq!(verdict(&store, &first), Verdict::Committed);
        // The upgrade: this release's gate over the same state.
        let text = "[gateway]\nfacility = \"f1\"\nid = \"gw\"\n\
             [[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\n";
        let cfg = Config::parse(text, None).unwrap();
        if bridged {
            gate.local_mut()
                .bridge_earlier_keys(&mut store, &cfg)
                .unwrap();
        }
        let mut owned = dispense("counter-1");
        owned.owner = Some("gw".into());
        let again = at(&owned, &dscsa("F1"), t0, 2_000);
        store.admit("f1", std::slice::from_ref(&again)).unwrap();
        scangate::claimer::round(&mut store, &mut gate, Some(&mut facility), "", &now).unwrap();
        let expected = match bridged {
            true => Verdict::Suppressed {
                twin: first.uuid.to_string(),
            },
            // Control: without the bridge, a second entry.
            false => Verdict::Committed,
        };
        assert_eq!(verdict(&store, &again), expected);
        assert_eq!(redis.ledger("f1").len(), if bridged { 1 } else { 2 });
        drop(root);
    }
}
