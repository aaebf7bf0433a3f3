//! `envsim score` as a stream: prediction files are read first (they are small), then the
//! benchmark one record at a time ([`crate::records`]); each sample is prepared, scored for
//! every system and dropped, so memory holds a few samples and the scores, however large the
//! states and the file.
//!
//! The reports are those of reading the whole benchmark, preparing every sample and scoring
//! each system over all of them (same scores, same order), and so are the errors, in the same
//! order of precedence: a benchmark that cannot be read or is not valid, then per prediction
//! file in order its reading, its format, and its match with the benchmark (an id that is not
//! in it, a second prediction for a sample, samples without one unless `allow_missing`).

use crate::prepare::parallel_map;
use crate::records::{open_benchmark, ReadError, RecordStream};
use envsim_core::baseline::Baseline;
use envsim_core::formats::{
    parse_predictions, FormatError, PredictionMatcher, PredictionRecord, RecordReader,
};
use envsim_core::report::Report;
use envsim_core::sample::{Prediction, Transition, Usage};
use envsim_core::score::{PreparedSample, SampleScore};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// Why scoring failed.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// A file cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// A file is not valid, or predictions do not match the benchmark.
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// One prediction file, read.
#[derive(Clone, Debug)]
pub struct PredictionFile {
    /// Its name, for the report and messages.
    pub name: String,
    /// Its predictions.
    pub records: Vec<PredictionRecord>,
}

/// Scores each prediction file, then each baseline, against the benchmark file `bench`: one
/// report per system, in that order. Samples without a prediction score as
/// [`Prediction::Missing`] when `allow_missing`, else they are an error.
pub fn score_files(
    bench: &Path,
    predictions: &[PathBuf],
    baselines: &[Baseline],
    allow_missing: bool,
) -> Result<Vec<Report>, ScoreError> {
    let unreadable = |path: &Path| {
        let path = path.to_owned();
        move |error| ScoreError::Read { path, error }
    };
    let bench_name = bench.display().to_string();
    let reader = open_benchmark(bench).map_err(unreadable(bench))?;
    // The prediction files up to the first that cannot be read; its error comes after the
    // benchmark's and after the earlier files' matches.
    let mut files = Vec::new();
    let mut pending = None;
    for path in predictions {
        let name = path.display().to_string();
        let read = std::fs::read(path)
            .map_err(unreadable(path))
            .and_then(|bytes| Ok(parse_predictions(&bytes, &name)?));
        match read {
            Ok(records) => files.push(PredictionFile { name, records }),
            Err(error) => {
                pending = Some(error);
                break;
            }
        }
    }
    let mut stream = RecordStream::start(reader, &bench_name).map_err(unreadable(bench))?;
    let scored = score_stream(
        &mut stream,
        &bench_name,
        files,
        baselines,
        allow_missing,
        pending.is_none(),
    )
    .map_err(|error| match error {
        ReadError::Io(error) => unreadable(bench)(error),
        ReadError::Format(error) => ScoreError::Format(error),
    })?;
    match pending {
        Some(error) => Err(error),
        None => Ok(scored),
    }
}

/// [`score_files`] on a benchmark stream named `source` and prediction files already read.
/// With `score` false the predictions are only matched (nothing is prepared or scored) and no
/// report is made: for a caller that only needs the errors.
pub fn score_stream(
    stream: &mut RecordStream,
    source: &str,
    predictions: Vec<PredictionFile>,
    baselines: &[Baseline],
    allow_missing: bool,
    score: bool,
) -> Result<Vec<Report>, ReadError> {
    let names: Vec<String> = predictions
        .iter()
        .map(|f| f.name.clone())
        .chain(baselines.iter().map(|b| b.name().to_owned()))
        .collect();
    let mut matchers: Vec<PredictionMatcher> = predictions
        .into_iter()
        .map(|f| PredictionMatcher::new(f.records, &f.name))
        .collect();
    let mut scores: Vec<Vec<SampleScore>> = vec![Vec::new(); names.len()];
    let mut reader = RecordReader::new(source);
    // Samples prepared and scored together, one per core.
    let batch = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let mut pending: Vec<Pending> = Vec::with_capacity(batch);
    let flush = |pending: &mut Vec<Pending>, scores: &mut Vec<Vec<SampleScore>>| {
        let scored = parallel_map(std::mem::take(pending), |p| p.score(baselines));
        for sample in scored {
            for (out, score) in scores.iter_mut().zip(sample) {
                out.push(score);
            }
        }
    };
    while let Some(item) = stream.blocking_next() {
        let transitions = match reader.read(item?) {
            Ok(transitions) => transitions,
            // A syntax error further on is what the whole-file reader reports.
            Err(error) => return Err(stream.blocking_rest_error().unwrap_or(error.into())),
        };
        for transition in transitions {
            let predictions = matchers.iter_mut().map(|m| m.take(&transition)).collect();
            if score {
                pending.push(Pending {
                    transition,
                    predictions,
                });
                if pending.len() >= batch {
                    flush(&mut pending, &mut scores);
                }
            }
        }
    }
    flush(&mut pending, &mut scores);
    reader.finish()?;
    for matcher in matchers {
        matcher.finish(allow_missing)?;
    }
    if !score {
        return Ok(Vec::new());
    }
    Ok(names
        .into_iter()
        .zip(scores)
        .map(|(name, scores)| Report::new(name, scores))
        .collect())
}

/// A transition waiting to be scored, with each prediction file's prediction for it.
struct Pending {
    transition: Transition,
    predictions: Vec<(Prediction, Option<Usage>)>,
}

impl Pending {
    /// The sample's scores: each prediction file's, then each baseline's.
    fn score(self, baselines: &[Baseline]) -> Vec<SampleScore> {
        let mut sample = PreparedSample::new(self.transition);
        let mut scores: Vec<SampleScore> = self
            .predictions
            .iter()
            .map(|(prediction, usage)| sample.score(prediction, *usage))
            .collect();
        for baseline in baselines {
            let prediction = baseline.predict(sample.transition());
            scores.push(sample.score(&prediction, None));
        }
        scores
    }
}
