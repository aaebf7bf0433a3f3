//! Why a task could not be synthesized at all (a conversation that ends badly is a record,
//! with its `finish`, not an error): the store marks the task failed with it, and a rerun
//! retries it.

use envsim_llm::LlmError;

/// Why a task could not be synthesized.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A model (the agent, the user, the task writer) could not be asked.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// A model's answer the conversation cannot go on from (a user's reply that does not
    /// read).
    #[error("{model}: {message}")]
    Unreadable {
        /// The model.
        model: String,
        /// What was wrong with the answer.
        message: String,
    },
    /// The task cannot run against this environment (a state it does not have).
    #[error("{0}")]
    Task(String),
    /// The simulated session could not take a step (a simulator that cannot be reached).
    #[error("{env}: {tool}: {message}")]
    Session {
        /// The environment.
        env: String,
        /// The tool of the step.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The executor could not replay a step for the truth.
    #[error("the executor could not replay {tool}: {message}")]
    Truth {
        /// The tool of the step.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The executor could not run the trajectory's calls for its RL checker.
    #[error("the executor could not make the RL checker: {0}")]
    Checker(#[from] envsim_sim::reference::ReferenceError),
}
