//! The committed smoke results (`results/smoke/`) still read, re-render and count as done: every
//! record round-trips through the typed record byte for byte, the rendered views equal the
//! committed ones, and the smoke experiment's configuration hashes match the records'.

use engram_experiments::render_dir;
use engram_experiments::{
    CellRecord, CellState, Experiment, ResultsDir, current_plan, default_configs_dir, plan,
};
use engram_experiments::{load_pool, samples};
use engram_testkit::repo;

#[test]
fn committed_records_round_trip_byte_for_byte() {
    let cells = repo().join("results/smoke/cells");
    let mut n = 0;
    for entry in std::fs::read_dir(&cells).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let rec: CellRecord =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            rec.metrics.judged.is_some() && rec.metrics.method.is_some(),
            "{}",
            path.display()
        );
        let again = serde_json::to_string_pretty(&rec).unwrap();
        assert_eq!(again, text, "{} re-serializes differently", path.display());
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn committed_results_re_render_identically() {
    let committed = repo().join("results/smoke");
    let tmp = tempfile::tempdir().unwrap();
    let cells = tmp.path().join("cells");
    std::fs::create_dir_all(&cells).unwrap();
    for entry in std::fs::read_dir(committed.join("cells")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, cells.join(p.file_name().unwrap())).unwrap();
    }
    let r = render_dir(tmp.path(), None).unwrap();
    assert!(r.corrupt.is_empty(), "{:?}", r.corrupt);
    let curves = engram_experiments::CURVES_FILE;
    for f in engram_experiments::VIEW_FILES.into_iter().chain([curves]) {
        assert_eq!(
            std::fs::read_to_string(tmp.path().join(f)).unwrap(),
            std::fs::read_to_string(committed.join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn the_smoke_experiment_finds_its_committed_cells_done() {
    let file = repo().join("experiments/smoke.toml");
    let exp = Experiment::load(&file, &default_configs_dir(&file)).unwrap();
    let (pool, source) = load_pool(&exp).unwrap();
    let samples = samples(&exp, &pool, &source).unwrap();
    let planned = plan(
        &exp,
        &samples,
        &ResultsDir::new(repo().join("results/smoke")),
        &[],
    );
    assert_eq!(planned.len(), 16);
    for p in &planned {
        assert_eq!(p.state, CellState::Done, "{}", p.cell.id());
    }
    // The committed plan is the experiment's current one: no record is marked stale.
    let committed = ResultsDir::new(repo().join("results/smoke"))
        .read_plan()
        .unwrap()
        .expect("results/smoke/plan.json");
    assert_eq!(committed, current_plan(&exp, &samples));
}
