//! Answers written the ways agent logs hold them, and the chat records of the set.

use super::{AnswerStyle, PlantedFault, Workflow};
use serde_json::{json, Value};

/// `value` as Python's `repr` writes the equivalent dict/list/str/int/float/bool/None: what a
/// harness that logs `str(result)` produces.
pub fn python_literal(value: &Value) -> String {
    envsim_core::python::repr(&envsim_core::python::value::PyValue::from_json(value))
}

/// The text of a tool message answering `tool` with `answer` in `style`. A tool that returns
/// text (the database convention's packages) is answered with that text in every style: that
/// is what a log of such a tool holds.
pub fn render_answer(answer: &Value, style: AnswerStyle, tool: &str) -> String {
    if let Value::String(text) = answer {
        return text.clone();
    }
    match style {
        AnswerStyle::Json => answer.to_string(),
        AnswerStyle::PythonLiteral => python_literal(answer),
        AnswerStyle::Sentence => format!("The {tool} call returned {answer} as its result."),
    }
}

/// The OpenAI chat record of `workflow`, its answers in `style`, with `fault`'s answer at its
/// step: `env`, `task_id` (and `id`, which transcript readers take as the record's id), the
/// package `state` it starts from, and the messages (the request, then one assistant tool
/// call and one tool answer per step). No state is written: call-only, like real agent logs.
pub fn transcript(workflow: &Workflow, style: AnswerStyle, fault: Option<&PlantedFault>) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": format!("You operate the {} tools for the user.", workflow.env)}),
        json!({"role": "user", "content": workflow.request}),
    ];
    for (k, step) in workflow.steps.iter().enumerate() {
        let id = format!("call_{k}");
        let answer = match fault {
            Some(f) if f.step == k => &f.answer,
            _ => &step.answer,
        };
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": step.tool, "arguments": Value::Object(step.arguments.clone()).to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id,
            "content": render_answer(answer, style, &step.tool)}));
    }
    messages.push(json!({"role": "assistant", "content": "That is done."}));
    json!({
        "env": workflow.env,
        "task_id": workflow.task_id,
        "id": workflow.task_id,
        "state": workflow.state,
        "messages": messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_workflows::{Effect, ExecutedStep, FaultKind, Purpose};

    #[test]
    fn python_literals_are_written_as_repr_writes_them() {
        let v = json!({"success": true, "data": {"id": "A-1", "n": 3, "x": 2.0, "y": 0.25,
            "none": null, "flag": false, "t": "it's", "q": "say \"hi\"", "both": "it's \"x\"",
            "nl": "a\nb", "u": "Sørensen", "list": [1, "b"]}});
        assert_eq!(
            python_literal(&v),
            r#"{'success': True, 'data': {'id': 'A-1', 'n': 3, 'x': 2.0, 'y': 0.25, 'none': None, 'flag': False, 't': "it's", 'q': 'say "hi"', 'both': 'it\'s "x"', 'nl': 'a\nb', 'u': 'Sørensen', 'list': [1, 'b']}}"#
        );
    }

    #[test]
    fn answers_in_each_style_and_text_answers_as_they_are() {
        let v = json!({"success": false, "error": "issue X not found"});
        assert_eq!(
            render_answer(&v, AnswerStyle::Json, "get_issue"),
            r#"{"success":false,"error":"issue X not found"}"#
        );
        assert_eq!(
            render_answer(&v, AnswerStyle::PythonLiteral, "get_issue"),
            "{'success': False, 'error': 'issue X not found'}"
        );
        assert_eq!(
            render_answer(&v, AnswerStyle::Sentence, "get_issue"),
            r#"The get_issue call returned {"success":false,"error":"issue X not found"} as its result."#
        );
        let text = json!("Error: tenant T9 not found");
        for style in AnswerStyle::ALL {
            assert_eq!(
                render_answer(&text, style, "get_tenant"),
                "Error: tenant T9 not found"
            );
        }
    }

    #[test]
    fn a_transcript_names_its_state_and_carries_the_planted_answer() {
        let step = |tool: &str, answer: Value| ExecutedStep {
            tool: tool.into(),
            arguments: json!({"ticket_id": "T1"}).as_object().unwrap().clone(),
            answer,
            success: true,
            effect: Effect::default(),
            purpose: Purpose::Lookup,
            names: None,
            counterpart: None,
        };
        let workflow = Workflow {
            env: "desk".into(),
            state: "00.json".into(),
            task_id: "desk-000".into(),
            request: "Look up T1.".into(),
            steps: vec![
                step("get_ticket", json!({"success": true})),
                step("get_ticket", json!({"success": true})),
            ],
        };
        let fault = PlantedFault {
            kind: FaultKind::SchemaDrift,
            step: 1,
            tool: "get_ticket".into(),
            resource: None,
            detail: "d".into(),
            answer: json!({"success": "yes"}),
        };
        let record = transcript(&workflow, AnswerStyle::PythonLiteral, Some(&fault));
        assert_eq!(
            (record["id"].clone(), record["state"].clone()),
            (json!("desk-000"), json!("00.json"))
        );
        let messages = record["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2 + 2 * 2 + 1);
        assert_eq!(messages[3]["content"], json!("{'success': True}"));
        assert_eq!(messages[5]["content"], json!("{'success': 'yes'}"));
        assert_eq!(
            messages[4]["tool_calls"][0]["function"]["arguments"],
            json!(r#"{"ticket_id":"T1"}"#)
        );
        // The chat reader takes it back as two calls with their answers.
        let runs = crate::trajectories::read_runs(&record.to_string(), "set.jsonl", None).unwrap();
        assert_eq!(runs[0].steps.len(), 2);
        assert_eq!(runs[0].task_id, "desk-000");
    }
}
