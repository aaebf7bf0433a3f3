//! API descriptions (OpenAPI 3.0/3.1, OpenAI tool schemas) read into tool specifications.
//!
//! `envsim audit --spec FILE` checks simulated tool calls against an API description, which
//! the CLI parses (JSON or YAML) into a [`Value`]; [`parse_spec`] reads it into an [`ApiSpec`].
//!
//! **Forms.** OpenAPI 3.0.x/3.1.x (an object with `openapi`; Swagger 2.0 is refused): every
//! operation (path item × `get put post delete options head patch trace`) is a tool. OpenAI
//! tool schemas: an array of `{"type": "function", "function": {...}}`, `{"tools": [...]}`, or
//! legacy bare functions `{"name", "description", "parameters"}` (an array, or
//! `{"functions": [...]}`); `parameters` is kept as given (its refs point inside itself, where
//! validators follow them), a missing one is `{"type": "object"}`.
//!
//! **OpenAPI tools.** The name is the `operationId`, else [`derived_tool_name`]; duplicates are
//! an error. The description is `description`, else `summary`. The arguments schema has every
//! path/query/header/cookie parameter as a property (path-item parameters first, an
//! operation's own replacing the same `name` + `in`), with the parameter's description; path
//! parameters are required, and a template parameter nobody declared is a required string.
//! Headers `Accept`, `Content-Type` and `Authorization` are skipped, as OpenAPI says. Arguments
//! are keyed by name alone, so two parameters with one name are an error. A request body whose
//! schema is a plain object schema (`properties`, no combinators) with names no parameter uses
//! is merged in, its `required` too (a call that sends the body sends those, and most specs
//! leave `requestBody.required` out); any other body is one argument `body`, required when the
//! `requestBody` is. Of a `content` map, `application/json` is read, else the first type
//! ending in `json`, else the first.
//!
//! **Refs and dialects.** Local refs (`#/...`, a percent-decoded JSON Pointer) are inlined;
//! refs to other files or URLs are an error. A schema ref met again while it is being expanded
//! (a recursive type) becomes `{}`, which accepts anything, so the result is finite; so does
//! any ref past the first [`REF_BUDGET`] of one schema, so the result stays small. A 3.0
//! ref's siblings are ignored, as 3.0 says; in 3.1 annotation siblings (`description`, ...)
//! override the target's and other siblings stand beside an `allOf` of the target. 3.0 schemas
//! become JSON Schema: `nullable: true` adds `"null"` to `type` (and to an `enum`) and goes;
//! boolean `exclusiveMinimum`/`exclusiveMaximum` take the numeric form. Other 3.0-only
//! keywords (`example`, `xml`, `discriminator`, ...) stay: validators ignore unknown keywords.
//! 3.1 schemas are kept as written.
//!
//! **Effects.** [`ToolSpec::effects`] and [`ToolSpec::resource`] read the method and path,
//! after dropping leading API prefixes (`api`, `v1`, `v2`, ...):
//!
//! | path | GET, HEAD | POST | PUT, PATCH | DELETE |
//! |---|---|---|---|---|
//! | item `/things/{id}` | Read | Update | Update | Delete |
//! | collection `/things` | List | Create | Update | Delete |
//! | action `POST /things/{id}/cancel` | | Update of `things` | | |
//!
//! Custom methods (the `:verb` suffix of Google's API design guide): `/things/{id}:cancel` is
//! an action on the item (a read with GET or HEAD), `/things:reindex` an update of the
//! collection as a whole with no id (a listing with GET or HEAD). A path that is the
//! operation's own name and nothing else (`POST /sendMessage` with `operationId:
//! sendMessage`), with a method other than GET or HEAD, is a remote procedure: it has no
//! effects, and the audit guesses them from the name.
//!
//! Item and action effects name the last path parameter as `id_parameter`. An action's last
//! segment follows a parameter and is (or starts with) one of [`ACTION_VERBS`]; with another
//! method than POST that path is a collection. OPTIONS and TRACE have no effects. The resource
//! is the path up to its last literal segment, parameters as `*`
//! (`/users/{userId}/orders/{orderId}` → `users/*/orders`), the parent's for an action.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::audit::{EffectAnnotation, Operation};
use crate::pointer::JsonPointer;

/// An API description read into tools.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiSpec {
    /// Which form the description was in.
    pub format: SpecFormat,
    /// `info.title` of an OpenAPI document.
    pub title: Option<String>,
    /// The tools by name.
    pub tools: BTreeMap<String, ToolSpec>,
}

/// The form of an API description; serialized as [`SpecFormat::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SpecFormat {
    /// OpenAPI 3.0.x.
    #[serde(rename = "openapi_3_0")]
    OpenApi30,
    /// OpenAPI 3.1.x.
    #[serde(rename = "openapi_3_1")]
    OpenApi31,
    /// OpenAI function-calling tool schemas (current or legacy shape).
    #[serde(rename = "openai_tools")]
    OpenAiTools,
}

impl SpecFormat {
    /// The snake_case name: `openapi_3_0`, `openapi_3_1`, `openai_tools`.
    pub fn name(self) -> &'static str {
        match self {
            SpecFormat::OpenApi30 => "openapi_3_0",
            SpecFormat::OpenApi31 => "openapi_3_1",
            SpecFormat::OpenAiTools => "openai_tools",
        }
    }
}

/// One tool: an OpenAPI operation or an OpenAI function.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool's name (see the module doc for derived OpenAPI names).
    pub name: String,
    /// What the tool does, as the description says.
    pub description: Option<String>,
    /// JSON Schema (an object schema) of the call's arguments: for OpenAPI the parameters and
    /// request body, refs resolved; for OpenAI tools `parameters` as given (module doc).
    pub parameters: Value,
    /// The HTTP operation (OpenAPI only).
    pub http: Option<HttpOperation>,
    /// OpenAPI only: declared responses by status key as written ("200", "404", "4XX",
    /// "default").
    pub responses: BTreeMap<String, ResponseSpec>,
}

/// The HTTP side of an OpenAPI operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HttpOperation {
    /// The method, upper case (`GET`).
    pub method: String,
    /// The path template as written (`/users/{userId}`).
    pub path: String,
    /// The template's parameter names, in path order.
    pub path_parameters: Vec<String>,
}

/// A declared response of an OpenAPI operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseSpec {
    /// The response's description.
    pub description: Option<String>,
    /// JSON schema of the application/json (or any */*json, else first) content, refs
    /// resolved.
    pub schema: Option<Value>,
}

/// Why a document is not a usable API description, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct SpecError {
    /// RFC 6901 JSON Pointer into the document (`""` is the root), e.g.
    /// `/paths/~1users~1{id}/get/responses/200`.
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

type Parsed<T> = Result<T, SpecError>;
/// A value in the document and where it is.
type Located<'d> = (&'d Value, JsonPointer);

fn error(at: &JsonPointer, message: impl Into<String>) -> SpecError {
    let (pointer, message) = (at.to_string(), message.into());
    SpecError { pointer, message }
}

fn fail<T>(at: &JsonPointer, message: impl Into<String>) -> Parsed<T> {
    Err(error(at, message))
}

/// `value` as an object, or an error saying `what` must be one.
fn object<'v>(value: &'v Value, at: &JsonPointer, what: &str) -> Parsed<&'v Object> {
    let message = || error(at, format!("{what} must be an object"));
    value.as_object().ok_or_else(message)
}

type Object = Map<String, Value>;

/// Whether `word` is one of the whitespace-separated `words`.
fn listed(words: &str, word: &str) -> bool {
    words.split_whitespace().any(|listed| listed == word)
}

fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

/// Verbs that make a POST's last segment an action on the item before it
/// (`/orders/{id}/cancel`), compared with the lowercased segment and its first word.
pub const ACTION_VERBS: &str = "accept activate add adopt approve archive assign block book \
    cancel capture charge checkout clone close complete confirm copy deactivate decline \
    disable enable escalate execute finalize follow fulfill invite like lock mark merge move \
    open pause pay publish reactivate refund reject release remove renew reopen reset resend \
    restore resume retry return revoke run send ship start stop submit suspend transfer \
    trigger unarchive unassign unblock unfollow unlike unlock unpublish upgrade verify void";

impl ToolSpec {
    /// The declared response for an HTTP status: exact key, then the range key ("4XX",
    /// case-insensitive), then "default".
    pub fn response_for(&self, status: u16) -> Option<(&str, &ResponseSpec)> {
        let range = format!("{}XX", status / 100);
        let in_range = |(key, _): &(&String, _)| key.eq_ignore_ascii_case(&range);
        let found = self.responses.get_key_value(status.to_string().as_str());
        found
            .or_else(|| self.responses.iter().find(in_range))
            .or_else(|| self.responses.get_key_value("default"))
            .map(|(key, response)| (key.as_str(), response))
    }

    /// Whether a status is declared (as response_for finds something other than "default").
    pub fn declares(&self, status: u16) -> bool {
        matches!(self.response_for(status), Some((key, _)) if key != "default")
    }

    /// What the operation does to resources, derived from its method and path template
    /// (OpenAPI only; empty for tools without http). The rules are in the module doc.
    pub fn effects(&self) -> Vec<EffectAnnotation> {
        let Some((shape, http)) = self.shape() else {
            return Vec::new();
        };
        let operation = match (shape.kind, http.method.as_str()) {
            (Shape::Item, "GET" | "HEAD") => Operation::Read,
            (Shape::Item, "POST" | "PUT" | "PATCH") => Operation::Update,
            (Shape::Collection, "GET" | "HEAD") => Operation::List,
            (Shape::Collection, "POST") => Operation::Create,
            (Shape::Collection, "PUT" | "PATCH") | (Shape::Action | Shape::CollectionAction, _) => {
                Operation::Update
            }
            (_, "DELETE") => Operation::Delete,
            _ => return Vec::new(),
        };
        let (resource, id_parameter) = (shape.resource, shape.id_parameter);
        vec![EffectAnnotation {
            resource,
            operation,
            id_parameter,
        }]
    }

    /// The resource type of the path: the literal segments up to the last one, path
    /// parameters replaced by `*` — `/users/{userId}/orders/{orderId}` → "users/*/orders";
    /// `/users/{userId}` → "users"; leading API prefixes like `v1`, `api` (segments matching
    /// `^v\d+$` or "api") are dropped. An action (`POST /things/{id}/cancel`) acts on its
    /// parent ("things").
    pub fn resource(&self) -> Option<String> {
        self.shape().map(|(shape, _)| shape.resource)
    }

    fn shape(&self) -> Option<(PathShape, &HttpOperation)> {
        let http = self.http.as_ref()?;
        Some((PathShape::of(&self.name, http)?, http))
    }
}

#[derive(Clone, Copy)]
enum Shape {
    Item,
    Collection,
    Action,
    /// A custom method changing a collection as a whole (`POST /things:reindex`).
    CollectionAction,
}

/// An operation's path read as a resource.
struct PathShape {
    kind: Shape,
    resource: String,
    id_parameter: Option<String>,
}

/// The name of a `{name}` segment.
fn parameter_segment(segment: &str) -> Option<&str> {
    segment.strip_prefix('{')?.strip_suffix('}')
}

impl PathShape {
    fn of(tool: &str, http: &HttpOperation) -> Option<PathShape> {
        let mut segments: Vec<&str> = http.path.split('/').filter(|s| !s.is_empty()).collect();
        let prefixes = segments.iter().take_while(|s| is_api_prefix(s)).count();
        segments.drain(..prefixes);
        let last = segments.len().checked_sub(1)?;
        // A custom method (`/things/{id}:cancel`, `/things:search`) acts on what precedes the
        // colon: an item's change (or read), or a collection-wide change (or listing).
        if let Some((base, _verb)) = custom_method(segments[last]) {
            let reads = matches!(http.method.as_str(), "GET" | "HEAD");
            segments[last] = base;
            let id = parameter_segment(base);
            let kind = match (id, reads) {
                (Some(_), true) => Shape::Item,
                (Some(_), false) => Shape::Action,
                (None, true) => Shape::Collection,
                (None, false) => Shape::CollectionAction,
            };
            return PathShape::build(kind, &segments, id);
        }
        // A mutating endpoint named after its operation alone (`POST /sendMessage`) is a remote
        // procedure, not a collection of things it creates.
        if last == 0 && segments[0] == tool && !matches!(http.method.as_str(), "GET" | "HEAD") {
            return None;
        }
        let param = |index: usize| segments.get(index).and_then(|s| parameter_segment(s));
        let (kind, id) = match (param(last), last.checked_sub(1).and_then(param)) {
            (Some(id), _) => (Shape::Item, Some(id)),
            (None, Some(id)) if http.method == "POST" && is_action_verb(segments[last]) => {
                (Shape::Action, Some(id))
            }
            _ => (Shape::Collection, None),
        };
        let owner = match kind {
            Shape::Action => &segments[..last],
            _ => &segments[..],
        };
        PathShape::build(kind, owner, id)
    }

    /// The shape of a path ending in the item or collection acted on (`owner`): its resource
    /// is the path up to its last literal segment, parameters as `*`.
    fn build(kind: Shape, owner: &[&str], id: Option<&str>) -> Option<PathShape> {
        let end = owner.iter().rposition(|s| parameter_segment(s).is_none())?;
        let parts: Vec<&str> = owner[..=end]
            .iter()
            .map(|s| parameter_segment(s).map_or(*s, |_| "*"))
            .collect();
        Some(PathShape {
            kind,
            resource: parts.join("/"),
            id_parameter: id.map(str::to_owned),
        })
    }
}

/// A custom method's segment (`{id}:cancel`, `things:search`) as (what it acts on, verb).
fn custom_method(segment: &str) -> Option<(&str, &str)> {
    let at = match segment.rfind('}') {
        Some(close) => close + 1,
        None => segment.find(':')?,
    };
    let (base, verb) = segment.split_at(at);
    let verb = verb.strip_prefix(':')?;
    (!base.is_empty() && !verb.is_empty()).then_some((base, verb))
}

/// `v1`, `v2`, ..., `api` (any case).
fn is_api_prefix(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let version = lower.strip_prefix('v').unwrap_or("");
    lower == "api" || (!version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()))
}

fn is_action_verb(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let first_word = lower.split(['-', '_', '.', ':']).next().unwrap_or("");
    listed(ACTION_VERBS, &lower) || listed(ACTION_VERBS, first_word)
}

const SWAGGER: &str = "Swagger 2.0 is not supported: convert the document to OpenAPI 3.x";
const NOT_A_SPEC: &str = "not an API description: expected an OpenAPI 3.0/3.1 document (an \
    object with `openapi`), an array of OpenAI tools ({\"type\": \"function\", \"function\": \
    {...}}) or of function objects ({\"name\", \"description\", \"parameters\"}), or an object \
    with a `tools` or `functions` array";

/// Reads an already-parsed API description (see the module doc for the accepted forms).
pub fn parse_spec(doc: &Value) -> Result<ApiSpec, SpecError> {
    let root = JsonPointer::root();
    let has = |key: &str| doc.get(key).is_some();
    if has("openapi") {
        parse_openapi(doc)
    } else if has("swagger") {
        fail(&root.child("swagger"), SWAGGER)
    } else if let Some(key) = ["tools", "functions"].into_iter().find(|key| has(key)) {
        parse_tools(&doc[key], &root.child(key))
    } else if doc.is_array() {
        parse_tools(doc, &root)
    } else {
        fail(&root, NOT_A_SPEC)
    }
}

/// OpenAI tools, wrapped (`{"type": "function", "function": ...}`) or bare, mixed freely.
fn parse_tools(list: &Value, at: &JsonPointer) -> Parsed<ApiSpec> {
    let Value::Array(items) = list else {
        return fail(at, "expected an array of tools");
    };
    let mut tools = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        let item_at = at.child(index.to_string());
        let item = object(item, &item_at, "a tool")?;
        let (function, function_at) = match item.get("type") {
            None => (item, item_at.clone()),
            Some(kind) if kind == "function" => {
                let function_at = item_at.child("function");
                let function = item.get("function").unwrap_or(&Value::Null);
                (object(function, &function_at, "`function`")?, function_at)
            }
            Some(kind) => {
                let message = format!("tool type {kind} is not supported (only \"function\")");
                return fail(&item_at.child("type"), message);
            }
        };
        let name = match function.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => return fail(&function_at, "a function needs a non-empty string `name`"),
        };
        let parameters_at = function_at.child("parameters");
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(schema) => Value::Object(object(schema, &parameters_at, "`parameters`")?.clone()),
        };
        let description = text(function.get("description"));
        let (http, responses) = (None, BTreeMap::new());
        let tool = ToolSpec {
            name: name.clone(),
            description,
            parameters,
            http,
            responses,
        };
        if tools.insert(name.clone(), tool).is_some() {
            return fail(&item_at, format!("duplicate tool name {name:?}"));
        }
    }
    Ok(ApiSpec {
        format: SpecFormat::OpenAiTools,
        title: None,
        tools,
    })
}

/// Path item keys that are operations, in the order OpenAPI lists them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn parse_openapi(doc: &Value) -> Parsed<ApiSpec> {
    let root = JsonPointer::root();
    let version_at = root.child("openapi");
    let Some(version) = doc.get("openapi").and_then(Value::as_str) else {
        return fail(&version_at, "`openapi` must be a version string");
    };
    let in_series = |series: &str| {
        let rest = version.strip_prefix(series);
        rest.is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    let format = if in_series("3.0") {
        SpecFormat::OpenApi30
    } else if in_series("3.1") {
        SpecFormat::OpenApi31
    } else if version.starts_with('2') {
        return fail(&version_at, SWAGGER);
    } else {
        let message = format!("OpenAPI {version:?} is not supported (3.0.x and 3.1.x are)");
        return fail(&version_at, message);
    };
    let reader = OpenApiReader {
        doc,
        openapi_30: format == SpecFormat::OpenApi30,
    };
    let paths_at = root.child("paths");
    let no_paths = Object::new();
    let paths = match doc.get("paths") {
        None => &no_paths,
        Some(paths) => object(paths, &paths_at, "`paths`")?,
    };
    let mut tools: BTreeMap<String, ToolSpec> = BTreeMap::new();
    for (path, item) in paths.iter().filter(|(key, _)| !key.starts_with("x-")) {
        let (item, item_at) = reader.follow(item, &paths_at.child(path.as_str()))?;
        let item = object(item, &item_at, "a path item")?;
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let at = item_at.child(method);
            let tool = reader.operation(path, method, (item, &item_at), operation, &at)?;
            if let Some(HttpOperation { method, path, .. }) = tools
                .get(&tool.name)
                .and_then(|earlier| earlier.http.as_ref())
            {
                let message = format!(
                    "tool name {:?} is already used by {method} {path}",
                    tool.name
                );
                return fail(&at, message);
            }
            tools.insert(tool.name.clone(), tool);
        }
    }
    let title = text(doc.pointer("/info/title"));
    Ok(ApiSpec {
        format,
        title,
        tools,
    })
}

/// The name of an operation without `operationId`: the method and the path's segments,
/// snake-cased, `{param}` as `by_<param>` (`GET /users/{userId}/orders` →
/// `get_users_by_userid_orders`).
pub fn derived_tool_name(method: &str, path: &str) -> String {
    let spelled = format!("{method} {}", path.replace('{', " by ").replace('}', " "));
    let words: Vec<String> = spelled
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    words.join("_")
}

/// The `{name}`s of a path template, in order.
fn template_parameters(path: &str) -> Vec<String> {
    let names = path
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}'));
    names.map(|(name, _)| name.to_owned()).collect()
}

/// One declared parameter of an operation.
struct Parameter {
    name: String,
    location: String,
    required: bool,
    schema: Value,
    at: JsonPointer,
}

/// How many refs one schema (a parameter's, a body's, a response's) may inline: schemas that
/// refer to each other in many ways (a large API's resource graph) would otherwise inline into
/// trees exponentially large. Refs past the budget become `{}`, like recursive ones.
pub const REF_BUDGET: usize = 1000;

/// The state of inlining one schema's refs.
struct Expansion<'d> {
    /// The refs being expanded on the current path: the cycle guard.
    stack: Vec<&'d str>,
    /// How many more refs may be inlined.
    budget: usize,
}

impl Default for Expansion<'_> {
    fn default() -> Self {
        Expansion {
            stack: Vec::new(),
            budget: REF_BUDGET,
        }
    }
}

struct OpenApiReader<'d> {
    doc: &'d Value,
    openapi_30: bool,
}

/// Keywords whose value is a map of subschemas.
const SUBSCHEMA_MAPS: &str = "properties patternProperties dependentSchemas $defs definitions";
/// Keywords whose value is a subschema or a list of them.
const SUBSCHEMAS: &str = "items additionalProperties not if then else contains propertyNames \
    unevaluatedItems unevaluatedProperties additionalItems contentSchema allOf anyOf oneOf \
    prefixItems";
/// Keywords that only describe: as 3.1 `$ref` siblings they override the target's.
const ANNOTATIONS: &str =
    "title description default examples example deprecated readOnly writeOnly $comment";

impl<'d> OpenApiReader<'d> {
    /// The target of a local `$ref` (`reference` as written, `at` the `$ref` key).
    fn lookup(&self, reference: &str, at: &JsonPointer) -> Parsed<Located<'d>> {
        let Some(fragment) = reference.strip_prefix('#') else {
            let message = format!("external $ref {reference:?} is not supported (only `#/...`)");
            return fail(at, message);
        };
        let pointer = percent_decode(fragment).and_then(|text| JsonPointer::parse(&text).ok());
        match pointer.as_ref().and_then(|pointer| pointer.get(self.doc)) {
            Some(target) => Ok((target, pointer.unwrap_or_default())),
            None => fail(at, format!("$ref {reference:?} points at nothing")),
        }
    }

    /// A non-schema object (parameter, request body, response, path item) with its `$ref`
    /// chain followed; siblings of `$ref` are ignored, as OpenAPI's Reference Object says.
    fn follow(&self, value: &'d Value, at: &JsonPointer) -> Parsed<Located<'d>> {
        let (mut value, mut at) = (value, at.clone());
        let mut seen: Vec<&str> = Vec::new();
        while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
            if seen.contains(&reference) {
                return fail(&at.child("$ref"), format!("circular $ref {reference:?}"));
            }
            seen.push(reference);
            (value, at) = self.lookup(reference, &at.child("$ref"))?;
        }
        Ok((value, at))
    }

    /// A schema with its refs inlined and, for 3.0, rewritten into JSON Schema.
    fn schema(
        &self,
        value: &'d Value,
        at: &JsonPointer,
        expanding: &mut Expansion<'d>,
    ) -> Parsed<Value> {
        let Value::Object(schema) = value else {
            return Ok(value.clone());
        };
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            let keywords = self.keywords(schema.iter(), at, expanding)?;
            return Ok(Value::Object(keywords));
        };
        if expanding.budget == 0 || expanding.stack.contains(&reference) {
            return Ok(json!({}));
        }
        expanding.budget -= 1;
        let (target, target_at) = self.lookup(reference, &at.child("$ref"))?;
        expanding.stack.push(reference);
        let resolved = self.schema(target, &target_at, expanding);
        expanding.stack.pop();
        let resolved = resolved?;
        let siblings = schema.iter().filter(|(key, _)| *key != "$ref");
        if self.openapi_30 || schema.len() == 1 {
            return Ok(resolved);
        }
        let describes = siblings.clone().all(|(key, _)| listed(ANNOTATIONS, key));
        let siblings = self.keywords(siblings, at, expanding)?;
        Ok(match resolved {
            Value::Object(mut merged) if describes => {
                merged.extend(siblings);
                Value::Object(merged)
            }
            resolved => {
                let mut combined = Object::from_iter([("allOf".into(), json!([resolved]))]);
                combined.extend(siblings);
                Value::Object(combined)
            }
        })
    }

    /// A schema object's keywords: subschemas converted, everything else copied.
    fn keywords(
        &self,
        keywords: impl Iterator<Item = (&'d String, &'d Value)>,
        at: &JsonPointer,
        expanding: &mut Expansion<'d>,
    ) -> Parsed<Object> {
        let mut out = Object::new();
        for (key, value) in keywords {
            let value_at = at.child(key.as_str());
            let converted = match value {
                Value::Object(members) if listed(SUBSCHEMA_MAPS, key) => {
                    let mut map = Object::new();
                    for (name, member) in members {
                        let member_at = value_at.child(name.as_str());
                        map.insert(name.clone(), self.schema(member, &member_at, expanding)?);
                    }
                    Value::Object(map)
                }
                Value::Array(members) if listed(SUBSCHEMAS, key) => {
                    let mut list = Vec::with_capacity(members.len());
                    for (index, member) in members.iter().enumerate() {
                        let member_at = value_at.child(index.to_string());
                        list.push(self.schema(member, &member_at, expanding)?);
                    }
                    Value::Array(list)
                }
                _ if listed(SUBSCHEMAS, key) => self.schema(value, &value_at, expanding)?,
                _ => value.clone(),
            };
            out.insert(key.clone(), converted);
        }
        if self.openapi_30 {
            openapi_30_to_json_schema(&mut out);
        }
        Ok(out)
    }

    /// The schema of the preferred media type of a `content` map, converted.
    fn content_schema(
        &self,
        content: Option<&'d Value>,
        at: &JsonPointer,
    ) -> Parsed<Option<Value>> {
        let Some(content) = content else {
            return Ok(None);
        };
        let media_types = object(content, at, "`content`")?;
        let essence = |key: &str| {
            key.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        };
        let pick =
            |wanted: fn(&str) -> bool| media_types.iter().find(|(key, _)| wanted(&essence(key)));
        let chosen = pick(|essence| essence == "application/json")
            .or_else(|| pick(|essence| essence.ends_with("json")))
            .or_else(|| media_types.iter().next());
        let Some((key, media)) = chosen else {
            return Ok(None);
        };
        let media_at = at.child(key.as_str());
        let schema = object(media, &media_at, "a media type")?.get("schema");
        let at = media_at.child("schema");
        schema
            .map(|schema| self.schema(schema, &at, &mut Expansion::default()))
            .transpose()
    }

    /// The parameters of a `parameters` list (absent = none).
    fn parameters(&self, list: Option<&'d Value>, at: &JsonPointer) -> Parsed<Vec<Parameter>> {
        let entries = match list {
            None => return Ok(Vec::new()),
            Some(Value::Array(entries)) => entries,
            Some(_) => return fail(at, "`parameters` must be an array"),
        };
        let mut parameters = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let (entry, at) = self.follow(entry, &at.child(index.to_string()))?;
            let fields = object(entry, &at, "a parameter")?;
            let Some(name) = fields.get("name").and_then(Value::as_str) else {
                return fail(&at, "a parameter needs a string `name`");
            };
            let location = match fields.get("in").and_then(Value::as_str) {
                Some(location @ ("path" | "query" | "header" | "cookie")) => location,
                _ => {
                    let message = "`in` must be \"path\", \"query\", \"header\" or \"cookie\"";
                    return fail(&at.child("in"), format!("parameter {name:?}: {message}"));
                }
            };
            let mut schema = match fields.get("schema") {
                Some(schema) => {
                    self.schema(schema, &at.child("schema"), &mut Expansion::default())?
                }
                None => self
                    .content_schema(fields.get("content"), &at.child("content"))?
                    .unwrap_or(json!({})),
            };
            // The parameter's description is what a model reads about the argument.
            describe(&mut schema, fields.get("description"));
            parameters.push(Parameter {
                name: name.to_owned(),
                location: location.to_owned(),
                required: location == "path" || fields.get("required") == Some(&Value::Bool(true)),
                schema,
                at,
            });
        }
        Ok(parameters)
    }

    /// One operation as a tool; `item` is its path item, for the shared parameters.
    fn operation(
        &self,
        path: &str,
        method: &str,
        (item, item_at): (&'d Object, &JsonPointer),
        operation: &'d Value,
        at: &JsonPointer,
    ) -> Parsed<ToolSpec> {
        let fields = object(operation, at, "an operation")?;
        let name = match fields.get("operationId") {
            None => derived_tool_name(method, path),
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(_) => return fail(&at.child("operationId"), "must be a non-empty string"),
        };
        let mut declared = self.parameters(item.get("parameters"), &item_at.child("parameters"))?;
        for own in self.parameters(fields.get("parameters"), &at.child("parameters"))? {
            let same = |shared: &&mut Parameter| {
                shared.name == own.name && shared.location == own.location
            };
            match declared.iter_mut().find(same) {
                Some(shared) => *shared = own,
                None => declared.push(own),
            }
        }
        let mut properties = Object::new();
        let mut required: Vec<Value> = Vec::new();
        let mut locations: BTreeMap<String, String> = BTreeMap::new();
        for parameter in declared {
            let lower = parameter.name.to_ascii_lowercase();
            if parameter.location == "header" && listed("accept content-type authorization", &lower)
            {
                continue;
            }
            let (name, location) = (&parameter.name, &parameter.location);
            if let Some(other) = locations.insert(name.clone(), location.clone()) {
                let message = format!(
                    "parameter {name:?} ({location}) has the name of one in {other}; \
                     tool arguments need distinct names"
                );
                return fail(&parameter.at, message);
            }
            if parameter.required {
                required.push(Value::String(name.clone()));
            }
            properties.insert(parameter.name, parameter.schema);
        }
        let path_parameters = template_parameters(path);
        for name in &path_parameters {
            if !properties.contains_key(name) {
                properties.insert(name.clone(), json!({"type": "string"}));
                required.push(Value::String(name.clone()));
            }
        }
        if let Some(body) = fields.get("requestBody") {
            let (body, body_at) = self.follow(body, &at.child("requestBody"))?;
            let body = object(body, &body_at, "`requestBody`")?;
            let content = self.content_schema(body.get("content"), &body_at.child("content"))?;
            let mut schema = content.unwrap_or(json!({}));
            if let Some((body_properties, body_required)) = mergeable(&schema, &properties) {
                properties.extend(body_properties);
                for name in body_required {
                    if !required.contains(&name) {
                        required.push(name);
                    }
                }
            } else if properties.contains_key("body") {
                let message =
                    "the request body cannot be argument `body`: a parameter has that name";
                return fail(&body_at, message);
            } else {
                describe(&mut schema, body.get("description"));
                properties.insert("body".into(), schema);
                if body.get("required") == Some(&Value::Bool(true)) {
                    required.push(json!("body"));
                }
            }
        }
        let mut parameters = Object::from_iter([("type".into(), json!("object"))]);
        parameters.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            parameters.insert("required".into(), Value::Array(required));
        }
        let summary = || text(fields.get("summary"));
        Ok(ToolSpec {
            name,
            description: text(fields.get("description")).or_else(summary),
            parameters: Value::Object(parameters),
            http: Some(HttpOperation {
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                path_parameters,
            }),
            responses: self.responses(fields.get("responses"), &at.child("responses"))?,
        })
    }

    fn responses(
        &self,
        responses: Option<&'d Value>,
        at: &JsonPointer,
    ) -> Parsed<BTreeMap<String, ResponseSpec>> {
        let mut out = BTreeMap::new();
        let Some(responses) = responses else {
            return Ok(out);
        };
        let responses = object(responses, at, "`responses`")?;
        for (status, response) in responses.iter().filter(|(key, _)| !key.starts_with("x-")) {
            let (response, at) = self.follow(response, &at.child(status.as_str()))?;
            let fields = object(response, &at, "a response")?;
            let schema = self.content_schema(fields.get("content"), &at.child("content"))?;
            let description = text(fields.get("description"));
            out.insert(
                status.clone(),
                ResponseSpec {
                    description,
                    schema,
                },
            );
        }
        Ok(out)
    }
}

/// Gives an argument's schema its parameter's or body's description, unless it has one.
fn describe(schema: &mut Value, description: Option<&Value>) {
    if let (Value::Object(schema), Some(description)) = (schema, description) {
        let entry = schema.entry("description");
        entry.or_insert_with(|| description.clone());
    }
}

/// The properties and required names of a body schema that can be merged into the
/// arguments: a plain object schema whose property names the parameters do not use.
fn mergeable(schema: &Value, taken: &Object) -> Option<(Object, Vec<Value>)> {
    // Keywords that constrain the body beyond its properties would be lost in a merge.
    const OBSTACLES: &str = "allOf anyOf oneOf not if then else patternProperties \
        dependentSchemas dependentRequired unevaluatedProperties $ref";
    let schema = schema.as_object()?;
    let properties = schema.get("properties")?.as_object()?;
    let plain = schema.get("type").is_none_or(|kind| kind == "object")
        && !schema.keys().any(|keyword| listed(OBSTACLES, keyword))
        && matches!(
            schema.get("additionalProperties"),
            None | Some(Value::Bool(_))
        )
        && !properties.keys().any(|name| taken.contains_key(name));
    let required = schema.get("required").and_then(Value::as_array).cloned();
    plain.then(|| (properties.clone(), required.unwrap_or_default()))
}

/// OpenAPI 3.0's schema dialect into JSON Schema, on one schema object.
fn openapi_30_to_json_schema(schema: &mut Object) {
    if schema.shift_remove("nullable") == Some(Value::Bool(true)) {
        for keyword in ["type", "enum"] {
            let null = if keyword == "type" {
                json!("null")
            } else {
                Value::Null
            };
            match schema.get_mut(keyword) {
                Some(Value::Array(values)) if !values.contains(&null) => values.push(null),
                Some(kind @ Value::String(_)) if keyword == "type" => {
                    *kind = json!([kind.take(), "null"])
                }
                _ => {}
            }
        }
    }
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        let Some(Value::Bool(flag)) = schema.get(exclusive).cloned() else {
            continue;
        };
        // `exclusiveMinimum: true` made `minimum` exclusive; 2020-12 says so with a number.
        let limit = flag.then(|| schema.shift_remove(bound)).flatten();
        match limit {
            Some(limit) => schema.insert(exclusive.into(), limit),
            None => schema.shift_remove(exclusive),
        };
    }
}

/// Percent-decodes a URI fragment; `None` on a bad escape or non-UTF-8 result.
fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(byte);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn petstore() -> Value {
        json!({
            "openapi": "3.0.3",
            "info": {"title": "Petstore", "version": "1"},
            "paths": {
                "/v1/pets": {
                    "get": {
                        "operationId": "listPets", "summary": "List pets",
                        "parameters": [{"name": "limit", "in": "query",
                            "schema": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}}],
                        "responses": {
                            "200": {"description": "ok", "content": {"application/json": {"schema":
                                {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}},
                            "default": {"$ref": "#/components/responses/Error"}}
                    },
                    "post": {
                        "description": "Adds a pet",
                        "requestBody": {"required": true, "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/NewPet"}}}},
                        "responses": {"201": {"description": "created"}, "4xx": {"description": "bad"}}
                    }
                },
                "/v1/pets/{petId}": {
                    "parameters": [
                        {"$ref": "#/components/parameters/PetId"},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                        {"name": "Authorization", "in": "header", "schema": {"type": "string"}}],
                    "get": {
                        "operationId": "getPet",
                        "parameters": [{"name": "X-Trace", "in": "header", "required": true,
                            "description": "trace id", "schema": {"type": "string", "nullable": true}}],
                        "responses": {"200": {"description": "the pet", "content": {
                            "text/plain": {"schema": {"type": "string"}},
                            "application/vnd.pet+json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}
                    },
                    "put": {
                        "operationId": "tagPet",
                        "requestBody": {"description": "tags", "content": {"application/json": {
                            "schema": {"type": "array", "items": {"type": "string"}}}}}
                    },
                    "delete": {"operationId": "deletePet"}
                },
                "/v1/pets/{petId}/adopt": {"post": {"operationId": "adoptPet"}},
                "/v1/pets/{petId}/toys": {"get": {}, "post": {}}
            },
            "components": {
                "parameters": {"PetId": {"name": "petId", "in": "path", "required": true,
                    "schema": {"$ref": "#/components/schemas/PetId"}}},
                "responses": {"Error": {"description": "error", "content": {
                    "application/problem+json": {"schema": {"type": "object"}}}}},
                "schemas": {
                    "PetId": {"$ref": "#/components/schemas/Id"},
                    "Id": {"type": "string", "description": "identifier"},
                    "Pet": {"type": "object", "required": ["id", "name"], "properties": {
                        "id": {"$ref": "#/components/schemas/PetId"},
                        "name": {"type": "string"},
                        "tag": {"type": "string", "nullable": true},
                        "mood": {"enum": ["calm", "wild"], "nullable": true},
                        "parent": {"$ref": "#/components/schemas/Pet"}}},
                    "NewPet": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"},
                        "age": {"type": "integer", "maximum": 40, "exclusiveMaximum": false}}}
                }
            }
        })
    }

    fn tool<'s>(spec: &'s ApiSpec, name: &str) -> &'s ToolSpec {
        &spec.tools[name]
    }

    fn http_tool(method: &str, path: &str) -> ToolSpec {
        let path_parameters = template_parameters(path);
        let (method, path) = (method.to_owned(), path.to_owned());
        ToolSpec {
            name: "t".into(),
            description: None,
            parameters: json!({"type": "object"}),
            http: Some(HttpOperation {
                method,
                path,
                path_parameters,
            }),
            responses: BTreeMap::new(),
        }
    }

    fn error_at(doc: Value) -> String {
        parse_spec(&doc).map(|_| ()).unwrap_err().pointer
    }

    #[test]
    fn reads_openapi_30_operations_as_tools() {
        let spec = parse_spec(&petstore()).unwrap();
        assert_eq!(spec.format, SpecFormat::OpenApi30);
        assert_eq!(spec.format.name(), "openapi_3_0");
        assert_eq!(spec.title.as_deref(), Some("Petstore"));
        let names: Vec<&str> = spec.tools.keys().map(String::as_str).collect();
        let expected = [
            "adoptPet",
            "deletePet",
            "getPet",
            "get_v1_pets_by_petid_toys",
            "listPets",
            "post_v1_pets",
            "post_v1_pets_by_petid_toys",
            "tagPet",
        ];
        assert_eq!(names, expected);
        let list = tool(&spec, "listPets");
        assert_eq!(list.description.as_deref(), Some("List pets"));
        let limit = json!({"type": "integer", "exclusiveMinimum": 0});
        let expected = json!({"type": "object", "properties": {"limit": limit}});
        assert_eq!(list.parameters, expected);
        assert_eq!(list.http, http_tool("GET", "/v1/pets").http);
        // The ref chain PetId → Id is followed; the recursive `parent` is cut to {}.
        let pet = json!({"type": "object", "required": ["id", "name"], "properties": {
            "id": {"type": "string", "description": "identifier"},
            "name": {"type": "string"},
            "tag": {"type": ["string", "null"]},
            "mood": {"enum": ["calm", "wild", null]},
            "parent": {}}});
        let pets = json!({"type": "array", "items": pet});
        assert_eq!(list.responses["200"].schema, Some(pets));
        let error = &list.responses["default"];
        assert_eq!(error.description.as_deref(), Some("error"));
        assert_eq!(error.schema, Some(json!({"type": "object"})));
        // A `+json` media type is preferred over the first one.
        assert_eq!(tool(&spec, "getPet").responses["200"].schema, Some(pet));
    }

    #[test]
    fn builds_argument_schemas() {
        let spec = parse_spec(&petstore()).unwrap();
        // The body's properties are merged, `required` too; `exclusiveMaximum: false` dropped.
        let add = tool(&spec, "post_v1_pets");
        assert_eq!(add.description.as_deref(), Some("Adds a pet"));
        let expected = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "age": {"type": "integer", "maximum": 40}}});
        assert_eq!(add.parameters, expected);
        // Path-level parameters are shared, an operation's own replaces one (name + in), the
        // Authorization header is skipped, and `nullable` becomes a type union.
        let expected = json!({"type": "object", "required": ["petId", "X-Trace"], "properties": {
            "petId": {"type": "string", "description": "identifier"},
            "X-Trace": {"type": ["string", "null"], "description": "trace id"}}});
        assert_eq!(tool(&spec, "getPet").parameters, expected);
        // A non-object body is `body`, optional as its requestBody is.
        let put = tool(&spec, "tagPet");
        let expected = json!({"type": "object", "required": ["petId"], "properties": {
            "petId": {"type": "string", "description": "identifier"},
            "X-Trace": {"type": "string"},
            "body": {"type": "array", "items": {"type": "string"}, "description": "tags"}}});
        assert_eq!(put.parameters, expected);
        assert_eq!(put.http.as_ref().unwrap().path_parameters, ["petId"]);
        // An undeclared template parameter is a required string.
        let toys = &tool(&spec, "get_v1_pets_by_petid_toys").parameters;
        assert_eq!(toys["properties"]["petId"], json!({"type": "string"}));
        // Every schema is an object schema, with `required` only when non-empty.
        for tool in spec.tools.values() {
            let schema = tool.parameters.as_object().unwrap();
            assert_eq!(schema["type"], "object");
            assert!(schema["properties"].is_object());
            let required = schema
                .get("required")
                .map(|names| names.as_array().unwrap());
            assert!(required.is_none_or(|names| !names.is_empty()));
        }
    }

    #[test]
    fn derives_names_from_method_and_path() {
        let name = derived_tool_name("get", "/users/{userId}/orders");
        assert_eq!(name, "get_users_by_userid_orders");
        let cases = [
            ("post", "/pet-store/v1.2/items", "post_pet_store_v1_2_items"),
            ("get", "/files/{name}.{ext}", "get_files_by_name_by_ext"),
            ("delete", "/", "delete"),
        ];
        for (method, path, name) in cases {
            assert_eq!(derived_tool_name(method, path), name);
        }
    }

    #[test]
    fn finds_declared_responses() {
        let spec = parse_spec(&petstore()).unwrap();
        let key = |tool: &str, status| tool_key(&spec, tool, status);
        fn tool_key<'s>(spec: &'s ApiSpec, name: &str, status: u16) -> Option<&'s str> {
            tool(spec, name).response_for(status).map(|(key, _)| key)
        }
        assert_eq!(key("listPets", 200), Some("200"));
        assert_eq!(key("listPets", 404), Some("default"));
        assert_eq!(key("post_v1_pets", 422), Some("4xx"));
        assert_eq!(key("post_v1_pets", 500), None);
        let declares = |name: &str, status| tool(&spec, name).declares(status);
        assert!(declares("listPets", 200) && !declares("listPets", 404));
        assert!(declares("post_v1_pets", 404) && !declares("post_v1_pets", 500));
    }

    #[test]
    fn derives_effects_and_resources() {
        use Operation::*;
        // (method, path, resource, operation, whether `id` names the resource)
        let cases = [
            ("GET", "/things/{id}", "things", Some(Read), true),
            ("HEAD", "/things/{id}", "things", Some(Read), true),
            ("PUT", "/things/{id}", "things", Some(Update), true),
            ("PATCH", "/things/{id}", "things", Some(Update), true),
            ("POST", "/things/{id}", "things", Some(Update), true),
            ("DELETE", "/things/{id}", "things", Some(Delete), true),
            ("GET", "/api/v2/things", "things", Some(List), false),
            ("POST", "/things", "things", Some(Create), false),
            ("PUT", "/things", "things", Some(Update), false),
            ("DELETE", "/things", "things", Some(Delete), false),
            ("POST", "/things/{id}/cancel", "things", Some(Update), true),
            (
                "POST",
                "/a/{a}/b/{id}/mark-read",
                "a/*/b",
                Some(Update),
                true,
            ),
            // Not a verb, or not POST: a collection under the item.
            (
                "POST",
                "/things/{id}/notes",
                "things/*/notes",
                Some(Create),
                false,
            ),
            (
                "GET",
                "/things/{id}/cancel",
                "things/*/cancel",
                Some(List),
                false,
            ),
            ("POST", "/things/{id}:cancel", "things", Some(Update), true),
            ("GET", "/things/{id}:preview", "things", Some(Read), true),
            (
                "POST",
                "/v1/a/{a}/things:reindex",
                "a/*/things",
                Some(Update),
                false,
            ),
            ("GET", "/things:search", "things", Some(List), false),
            ("OPTIONS", "/things", "things", None, false),
            ("TRACE", "/things/{id}", "things", None, false),
        ];
        for (method, path, resource, operation, named) in cases {
            let tool = http_tool(method, path);
            let context = format!("{method} {path}");
            assert_eq!(tool.resource().as_deref(), Some(resource), "{context}");
            let annotation = |operation| EffectAnnotation {
                resource: resource.to_owned(),
                operation,
                id_parameter: named.then(|| "id".to_owned()),
            };
            let expected: Vec<_> = operation.into_iter().map(annotation).collect();
            assert_eq!(tool.effects(), expected, "{context}");
        }
        let resources = [
            ("/users/{userId}/orders/{orderId}", Some("users/*/orders")),
            ("/users/{userId}", Some("users")),
            ("/V1/users", Some("users")),
            ("/v1/api/users/{userId}/orders", Some("users/*/orders")),
            ("/version/users", Some("version/users")),
            ("/{id}", None),
            ("/", None),
        ];
        for (path, resource) in resources {
            let found = http_tool("GET", path).resource();
            assert_eq!(found.as_deref(), resource, "{path}");
        }
        let spec = parse_spec(&petstore()).unwrap();
        assert_eq!(tool(&spec, "adoptPet").resource().as_deref(), Some("pets"));
        // A remote procedure named by its own path has no effects; read with GET it lists.
        let rpc = |method: &str, name: &str| ToolSpec {
            name: name.to_owned(),
            ..http_tool(method, "/sendMessage")
        };
        assert!(rpc("POST", "sendMessage").effects().is_empty());
        assert_eq!(rpc("POST", "send").effects()[0].operation, Create);
        assert_eq!(rpc("GET", "sendMessage").effects()[0].operation, List);
        assert_eq!(custom_method("{id}:cancel"), Some(("{id}", "cancel")));
        assert_eq!(custom_method("{a:b}"), None);
        assert_eq!(custom_method("things:"), None);
        assert_eq!(custom_method(":x"), None);
        let plain = parse_spec(&json!([{"name": "f"}])).unwrap();
        assert!(tool(&plain, "f").effects().is_empty());
        assert_eq!(tool(&plain, "f").resource(), None);
    }

    #[test]
    fn keeps_openapi_31_schemas() {
        let doc = json!({"openapi": "3.1.0", "paths": {"/notes/{id}": {"patch": {
            "operationId": "editNote",
            "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "properties": {
                    "text": {"type": ["string", "null"], "exclusiveMinimum": 3},
                    "ref": {"$ref": "#/$defs/Text", "description": "own words"},
                    "tags": {"$ref": "#/$defs/Text", "maxItems": 2}}}}}}}}},
            "$defs": {"Text": {"type": "string", "description": "text"}}});
        let spec = parse_spec(&doc).unwrap();
        assert_eq!(spec.format, SpecFormat::OpenApi31);
        let expected = json!({"type": "object", "required": ["id"], "properties": {
            "id": {"type": "string"},
            "text": {"type": ["string", "null"], "exclusiveMinimum": 3},
            "ref": {"type": "string", "description": "own words"},
            "tags": {"allOf": [{"type": "string", "description": "text"}], "maxItems": 2}}});
        assert_eq!(tool(&spec, "editNote").parameters, expected);
    }

    #[test]
    fn reads_all_openai_tool_shapes_alike() {
        let function = json!({"name": "get_weather", "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "$defs": {"Unit": {"enum": ["C", "F"]}}}});
        let wrapped = json!({"type": "function", "function": function});
        let expected = ToolSpec {
            name: "get_weather".into(),
            description: Some("Weather now".into()),
            parameters: function["parameters"].clone(),
            http: None,
            responses: BTreeMap::new(),
        };
        let shapes = [
            json!([wrapped]),
            json!({"tools": [wrapped]}),
            json!([function]),
            json!({"functions": [function]}),
        ];
        for shape in shapes {
            let spec = parse_spec(&shape).unwrap();
            assert_eq!((spec.format, spec.title), (SpecFormat::OpenAiTools, None));
            assert_eq!(spec.tools.len(), 1);
            assert_eq!(spec.tools["get_weather"], expected);
        }
        let bare = parse_spec(&json!([{"name": "ping"}])).unwrap();
        assert_eq!(bare.tools["ping"].parameters, json!({"type": "object"}));
    }

    #[test]
    fn reports_errors_with_pointers() {
        let openapi = |paths: Value| json!({"openapi": "3.1.0", "paths": paths});
        let error = parse_spec(&json!({"swagger": "2.0", "paths": {}})).unwrap_err();
        assert_eq!(error.to_string(), format!("/swagger: {SWAGGER}"));
        assert_eq!(error_at(json!({"openapi": "2.0"})), "/openapi");
        assert_eq!(error_at(json!({"openapi": "4.0.0"})), "/openapi");
        let error = parse_spec(&json!({"info": {}})).unwrap_err();
        assert_eq!(error.pointer, "");
        assert_eq!(error.message, NOT_A_SPEC);
        let external = openapi(json!({"/users/{id}": {"get": {"parameters": [
            {"name": "id", "in": "path", "schema": {"$ref": "common.yaml#/Id"}}]}}}));
        let error = parse_spec(&external).unwrap_err();
        let at = "/paths/~1users~1{id}/get/parameters/0/schema/$ref";
        assert_eq!(error.pointer, at);
        assert!(error.message.starts_with("external $ref"), "{error}");
        let duplicate = openapi(json!({
            "/a": {"get": {"operationId": "same"}},
            "/b": {"get": {"operationId": "same"}}}));
        let error = parse_spec(&duplicate).unwrap_err();
        assert_eq!(error.pointer, "/paths/~1b/get");
        let message = "tool name \"same\" is already used by GET /a";
        assert_eq!(error.message, message);
        let unnamed = openapi(json!({"/a": {"get": {"parameters": [{"in": "query"}]}}}));
        assert_eq!(error_at(unnamed), "/paths/~1a/get/parameters/0");
        let mut bad_in = openapi(json!({"/a": {"get": {"parameters": [
            {"$ref": "#/components/parameters/Q"}]}}}));
        bad_in["components"] = json!({"parameters": {"Q": {"name": "q", "in": "body"}}});
        assert_eq!(error_at(bad_in), "/components/parameters/Q/in");
        let clash = openapi(json!({"/a": {"get": {"parameters": [
            {"name": "q", "in": "query"}, {"name": "q", "in": "cookie"}]}}}));
        assert_eq!(error_at(clash), "/paths/~1a/get/parameters/1");
        let cases = [
            (
                openapi(json!({"/a": {"$ref": "#/nowhere"}})),
                "/paths/~1a/$ref",
            ),
            (openapi(json!([])), "/paths"),
            (openapi(json!({"/a": {"get": 1}})), "/paths/~1a/get"),
            (json!([{"name": "f"}, {"name": "f"}]), "/1"),
            (json!({"tools": [{"type": "web_search"}]}), "/tools/0/type"),
        ];
        for (doc, at) in cases {
            assert_eq!(error_at(doc), at);
        }
    }

    #[test]
    fn follows_percent_encoded_refs_and_refuses_ref_loops() {
        let mut doc = json!({"openapi": "3.0.0", "paths": {"/a": {"get": {
            "parameters": [{"$ref": "#/components/parameters/Loop"}]}}}});
        doc["components"] =
            json!({"parameters": {"Loop": {"$ref": "#/components/parameters/Loop"}}});
        assert_eq!(error_at(doc), "/components/parameters/Loop/$ref");
        let doc = json!({"openapi": "3.0.0", "paths": {
            "/x/{id}": {"get": {"operationId": "x", "parameters": [
                {"name": "id", "in": "path", "schema": {"type": "integer"}}]}},
            "/y": {"get": {"operationId": "y", "parameters": [
                {"$ref": "#/paths/~1x~1%7Bid%7D/get/parameters/0"}]}}}});
        let spec = parse_spec(&doc).unwrap();
        let expected = json!({"type": "object", "properties": {"id": {"type": "integer"}},
            "required": ["id"]});
        assert_eq!(tool(&spec, "y").parameters, expected);
        assert_eq!(percent_decode("%7Bid%7D").as_deref(), Some("{id}"));
        assert_eq!(percent_decode("%7"), None);
    }

    #[test]
    fn bounds_inlining_of_interlinked_schemas() {
        // Twelve schemas that all refer to each other: inlining every cycle-free path would
        // take 12! copies; the budget stops it.
        let names: Vec<String> = (0..12).map(|n| format!("S{n}")).collect();
        let refs: Object = names
            .iter()
            .map(|name| (name.clone(), json!({"$ref": format!("#/$defs/{name}")})))
            .collect();
        let schema = json!({"type": "object", "properties": refs});
        let defs: Object = names
            .iter()
            .map(|name| (name.clone(), schema.clone()))
            .collect();
        let doc = json!({"openapi": "3.1.0", "$defs": defs, "paths": {"/a": {"get": {
            "operationId": "a", "responses": {"200": {"content": {"application/json": {
                "schema": {"$ref": "#/$defs/S0"}}}}}}}}});
        let spec = parse_spec(&doc).unwrap();
        let inlined = spec.tools["a"].responses["200"]
            .schema
            .as_ref()
            .unwrap()
            .to_string();
        assert_eq!(inlined.matches("\"type\":\"object\"").count(), REF_BUDGET);
    }
}
