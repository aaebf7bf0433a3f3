//! Writing output files: whole or not at all, with the helper every envsim crate shares
//! ([`envsim_fs::write_atomic`]: a uniquely named temporary file in the same directory, flushed
//! to disk, then renamed over the destination; the directory is created if needed).

pub use envsim_fs::write_atomic;
