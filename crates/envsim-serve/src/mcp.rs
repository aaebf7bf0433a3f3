//! Every session's tools over MCP (Streamable HTTP, the official Rust SDK): `tools/list`
//! gives the session's tools with their argument schemas; `tools/call` takes one step of the
//! session, answering the observation as JSON text (and as structured content when it is an
//! object), marked as an error when the environment answered with a failure. Each envsim
//! session gets its own MCP service on first use, at `/sessions/{id}/mcp`.

use crate::{ApiError, AppState};
use axum::extract::{Path, Request, State};
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
        match self.state.step(&self.id, &request.name, &arguments).await {
            Ok((record, _)) => {
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

/// Hands an HTTP request to the session's MCP service.
pub async fn serve(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    if let Err(e) = state.entry(&id).await {
        return e.into_response();
    }
    let service = {
        let mut services = state.mcp_services();
        services
            .entry(id.clone())
            .or_insert_with(|| {
                let handler = SessionTools {
                    state: Arc::clone(&state),
                    id: id.clone(),
                };
                let mut config = StreamableHttpServerConfig::default();
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
    match service.oneshot(request).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    }
    .into_response()
}
