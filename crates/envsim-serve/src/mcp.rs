//! Every session's tools over MCP (Streamable HTTP, the official Rust SDK): `tools/list`
//! gives the session's tools with their argument schemas; `tools/call` takes one step of the
//! session, answering the observation as JSON text (and as structured content when it is an
//! object), marked as an error when the environment answered with a failure. Each envsim
//! session gets its own MCP service on first use, at `/sessions/{id}/mcp`.

use crate::{ApiError, AppState};
use axum::extract::{Path, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use std::sync::Arc;
use tower::ServiceExt;

/// The MCP service of one session.
pub type McpService = StreamableHttpService<SessionTools, LocalSessionManager>;

/// The MCP handler of one session.
#[derive(Clone)]
pub struct SessionTools {
    state: Arc<AppState>,
    id: String,
}

impl ServerHandler for SessionTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("envsim", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The tools of the simulated environment session {}: each call is one step of its explicit state.",
                self.id
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let entry = self
            .state
            .entry(&self.id)
            .await
            .map_err(|e| ErrorData::invalid_request(e.1, None))?;
        let tools = entry
            .env
            .tools
            .iter()
            .filter_map(|t| {
                let f = &t["function"];
                let schema: Map<String, Value> =
                    f["parameters"].as_object().cloned().unwrap_or_default();
                Some(Tool::new(
                    f["name"].as_str()?.to_owned(),
                    f["description"].as_str().unwrap_or_default().to_owned(),
                    Arc::new(schema),
                ))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let guard = crate::StepGuard::default();
        match self
            .state
            .step(&self.id, &request.name, &arguments, &guard)
            .await
        {
            Ok(crate::Stepped { record, .. }) => {
                let text = match &record.observation {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut result = if record.success == Some(false) {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                };
                if record.observation.is_object() {
                    result.structured_content = Some(record.observation.clone());
                }
                Ok(result.into())
            }
            // A call the session cannot take is the caller's to read, not a protocol failure.
            Err(ApiError(_, message)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
        }
    }
}

/// Hands an HTTP request to the session's MCP service, with the edges real clients need:
/// the server's body limit (`--max-body-bytes`), a JSON-RPC parse error for a body that is no
/// JSON, JSON-RPC error bodies instead of plain text, and a session ended by `DELETE`
/// answered 200 (the Python SDK takes anything but 200 or 204 as a failed termination).
pub async fn serve(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    if let Err(e) = state.entry(&id).await {
        return e.into_response();
    }
    let limit = state.config.max_body_bytes;
    let service = {
        let mut services = state.mcp_services();
        services
            .entry(id.clone())
            .or_insert_with(|| {
                let handler = SessionTools {
                    state: Arc::clone(&state),
                    id: id.clone(),
                };
                let mut config =
                    StreamableHttpServerConfig::default().with_max_request_body_bytes(limit);
                config = match &state.config.mcp_allowed_hosts {
                    Some(hosts) => config.with_allowed_hosts(hosts.clone()),
                    None => config.disable_allowed_hosts(),
                };
                StreamableHttpService::new(
                    move || Ok(handler.clone()),
                    Arc::new(LocalSessionManager::default()),
                    config,
                )
            })
            .clone()
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_REQUEST,
            &format!("the request body is over the limit of {limit} bytes"),
        );
    };
    let method = parts.method.clone();
    // A JSON body is read here first: what is no JSON gets the JSON-RPC parse error, and
    // what is JSON but no JSON-RPC message (the SDK answers 415) an invalid request.
    let json_body = method == Method::POST && is_json(&parts.headers);
    if json_body {
        if let Err(e) = serde_json::from_slice::<Value>(&bytes) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                PARSE_ERROR,
                &format!("parse error: the body is not JSON ({e})"),
            );
        }
    }
    let request = Request::from_parts(parts, axum::body::Body::from(bytes));
    let response = match service.oneshot(request).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    };
    let status = response.status();
    if method == Method::DELETE && status == StatusCode::ACCEPTED {
        return StatusCode::OK.into_response();
    }
    if status.is_client_error() || status.is_server_error() {
        if is_json(response.headers()) {
            return response;
        }
        let text = match axum::body::to_bytes(response.into_body(), 64 * 1024).await {
            Ok(b) => String::from_utf8_lossy(&b).trim().to_owned(),
            Err(_) => String::new(),
        };
        let (status, code) = match status {
            StatusCode::UNSUPPORTED_MEDIA_TYPE if json_body => {
                (StatusCode::BAD_REQUEST, INVALID_REQUEST)
            }
            s if s.is_server_error() => (s, INTERNAL_ERROR),
            s => (s, INVALID_REQUEST),
        };
        let message = if text.is_empty() {
            status.canonical_reason().unwrap_or("error").to_owned()
        } else {
            text
        };
        return rpc_error(status, code, &message);
    }
    response
}

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// Whether headers say the body is JSON (`application/json`, parameters aside).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        })
}

/// A JSON-RPC error response without an id (the request's could not be read).
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
    });
    (status, axum::Json(body)).into_response()
}
