//! Writes the demo benchmark and predictions: `make_demo DIR`.

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "data/demo".to_owned());
    std::fs::create_dir_all(&dir)?;
    let (bench, predictions) = envsim_testkit::demo_files();
    std::fs::write(format!("{dir}/benchmark.json"), bench)?;
    std::fs::write(format!("{dir}/predictions.jsonl"), predictions)?;
    Ok(())
}
