//! How near the deduplication of `env synth --batch` finds packages: each package of the
//! folders given after `--` compared with the corpus folder given first, once as a request
//! (its manifest's description alone, what a batch line holds) and once as a written package
//! (its whole manifest); and each corpus package's description compared with the rest of the
//! corpus (distinct domains: the similarities a threshold must stay above).
//!
//! `cargo run -p envsim-synth --example dedup_calibration -- envs -- DIR...`

use envsim_synth::envgen::batch::known_packages;
use envsim_synth::envgen::dedup::{Known, Profile};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let Some(corpus) = args.first().filter(|_| split >= 1) else {
        return Err("usage: dedup_calibration CORPUS -- FOLDER...".into());
    };
    let corpus = PathBuf::from(corpus);
    let foreign: Vec<PathBuf> = args[(split + 1).min(args.len())..]
        .iter()
        .map(PathBuf::from)
        .collect();
    let own = known_packages(&[corpus.as_path()], &[])?;
    let corpus_texts = descriptions(std::slice::from_ref(&corpus))?;

    println!(
        "corpus: each description against the other {} packages",
        own.len() - 1
    );
    let mut highest = Vec::new();
    for (name, text) in &corpus_texts {
        let others: Vec<Profile> = own.iter().filter(|p| &p.name != name).cloned().collect();
        let nearest = Known::new(others).nearest(&Profile::of_text(name, text));
        if let Some(n) = nearest {
            highest.push((n.similarity, name.clone(), n.name));
        }
    }
    highest.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (similarity, name, nearest) in highest.iter().take(8) {
        println!("  {name:<28} {nearest:<28} {similarity:.3}");
    }
    let sims: Vec<f64> = highest.iter().map(|h| h.0).collect();
    println!(
        "  highest {:.3}, median {:.3}",
        sims.first().copied().unwrap_or(0.0),
        sims.get(sims.len() / 2).copied().unwrap_or(0.0)
    );

    let mut packages: Vec<(f64, String, String)> = own
        .iter()
        .filter_map(|p| {
            let others: Vec<Profile> = own.iter().filter(|o| o.name != p.name).cloned().collect();
            Known::new(others)
                .nearest(p)
                .map(|n| (n.similarity, p.name.clone(), n.name))
        })
        .collect();
    packages.sort_by(|a, b| b.0.total_cmp(&a.0));
    if let Some((similarity, name, nearest)) = packages.first() {
        println!(
            "corpus: each package (its manifest) against the others: highest {similarity:.3} ({name} ~ {nearest}), median {:.3}",
            packages[packages.len() / 2].0
        );
    }
    println!("every package against all (corpus and foreign), asked for again: by its whole description | by its first sentence");
    let everything: Vec<PathBuf> = std::iter::once(corpus.clone())
        .chain(foreign.iter().cloned())
        .collect();
    let all = Known::new(known_packages(
        &everything.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        &[],
    )?);
    let (mut whole, mut first) = (Vec::new(), Vec::new());
    for (name, text) in descriptions(&everything)? {
        let sentence = text.split(". ").next().unwrap_or(&text).to_owned();
        for (text, into) in [(&text, &mut whole), (&sentence, &mut first)] {
            let n = all.nearest(&Profile::of_text(&name, text));
            into.push(n.filter(|n| n.name == name).map_or(0.0, |n| n.similarity));
        }
    }
    for (label, values) in [
        ("whole description", &mut whole),
        ("first sentence", &mut first),
    ] {
        values.sort_by(f64::total_cmp);
        let found = values.iter().filter(|v| **v > 0.0).count();
        println!(
            "  {label:<18} nearest is itself {found}/{}; similarity p10 {:.3}, median {:.3}; at 0.5 caught {}",
            values.len(),
            values[values.len() / 10],
            values[values.len() / 2],
            values.iter().filter(|v| **v >= 0.5).count()
        );
    }

    println!(
        "foreign packages against the corpus: as a request (description) | as a package (manifest)"
    );
    let known = Known::new(own);
    for (name, text) in descriptions(&foreign)? {
        let request = known.nearest(&Profile::of_text(&name, &text));
        let package = known_packages(
            &foreign.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
            &[],
        )?
        .into_iter()
        .find(|p| p.name == name)
        .and_then(|p| known.nearest(&p));
        let show = |n: Option<envsim_synth::envgen::dedup::Nearest>| {
            n.map_or("-".to_owned(), |n| {
                format!("{:<24} {:.3}", n.name, n.similarity)
            })
        };
        println!("  {name:<28} {} | {}", show(request), show(package));
    }
    Ok(())
}

/// (folder name, manifest description) of every package in `dirs`.
fn descriptions(dirs: &[PathBuf]) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for dir in dirs {
        let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("manifest.json").is_file())
            .collect();
        folders.sort();
        for folder in folders {
            let manifest: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(folder.join("manifest.json"))?)?;
            let name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = manifest["description"].as_str().unwrap_or("").to_owned();
            out.push((name, text));
        }
    }
    Ok(out)
}
