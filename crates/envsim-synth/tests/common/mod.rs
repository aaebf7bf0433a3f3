//! What the environment-writing tests share.

use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::FaultySimulator;
use envsim_synth::envgen::files::PackageFiles;
use envsim_synth::gate::environments;
use envsim_testkit::tally::{answer, CODE, TESTS};
use std::sync::Arc;

/// The gate's simulator: the good tally package read perfectly (its code, through the faulty
/// double at rate 0), whatever draft it is asked about.
pub fn reader(executor: Arc<Executor>) -> impl Fn(&EnvPackage) -> Arc<dyn Simulator> + Sync {
    let dir = tempfile::tempdir().unwrap();
    let files = PackageFiles::parse(&answer(CODE, Some(TESTS))).unwrap();
    files.write(&dir.path().join("tally")).unwrap();
    let good = EnvPackage::load(&dir.path().join("tally")).unwrap();
    let (with_code, _) = environments(&good).unwrap();
    move |_: &EnvPackage| {
        Arc::new(FaultySimulator::new(
            ExecutorSimulator::new(Arc::clone(&executor)).knowing(&with_code),
            0.0,
            3,
            "reader",
        )) as Arc<dyn Simulator>
    }
}
