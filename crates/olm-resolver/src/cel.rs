//! CEL rules of `olm.constraint` (`{"cel": {"rule": "..."}}`), on the `cel`
//! crate (cel-rust, the maintained successor of `cel-interpreter`).
//!
//! As upstream (operator-framework/api `constraints.NewCelEnvironment`): one
//! variable, `properties`, the candidate's properties as a list of
//! `{type, value}` maps with JSON-decoded values; one extra function,
//! `semver_compare(a, b)`, which compares two semantic versions and returns
//! -1, 0 or 1; a rule must yield a boolean, and an evaluation error counts as
//! "does not match".
//!
//! Evaluation cost is bounded before anything runs. The crate has no cost
//! tracker, so the bound is static: a rule has at most [`MAX_CEL_RULE_BYTES`]
//! bytes, [`MAX_CEL_NODES`] AST nodes and [`MAX_CEL_COMPREHENSION_DEPTH`]
//! nested macros (`all`, `exists`, `map`, `filter`, ...); and before a rule
//! runs against one candidate, its worst-case step count
//! (nodes x (widest list + 1) ^ depth, where the widest list a rule can build
//! is the widest list of the input times one more than the number of `+`
//! operators, since only concatenation lengthens a list) must stay under
//! [`MAX_CEL_COST`], otherwise the candidate does not match.

use std::sync::{Arc, OnceLock};

use cel::{
    Context, Env, ExecutionError, Program, Value,
    common::ast::{EntryExpr, Expr, IdedExpr},
};
use olm_catalog::semver::Version;

use crate::model::RawProperty;

/// The longest CEL rule accepted, in bytes.
pub const MAX_CEL_RULE_BYTES: usize = 4096;
/// The largest CEL rule accepted, in AST nodes (after macro expansion).
pub const MAX_CEL_NODES: usize = 512;
/// The deepest nesting of comprehension macros accepted.
pub const MAX_CEL_COMPREHENSION_DEPTH: usize = 3;
/// The most evaluation steps a rule may take on one candidate (estimated
/// statically, see the module documentation).
pub const MAX_CEL_COST: u128 = 10_000_000;
/// The name of the variable holding the candidate's properties.
pub const PROPERTIES_VARIABLE: &str = "properties";
/// The name of upstream's semantic version comparison function.
pub const SEMVER_COMPARE: &str = "semver_compare";

/// Why a CEL rule is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The rule is longer than [`MAX_CEL_RULE_BYTES`].
    #[error("cel rule is {len} bytes, more than the limit of {MAX_CEL_RULE_BYTES}")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The rule has more than [`MAX_CEL_NODES`] nodes or nests more than
    /// [`MAX_CEL_COMPREHENSION_DEPTH`] macros.
    #[error(
        "cel rule is too complex: {nodes} nodes (limit {MAX_CEL_NODES}), macro depth {depth} (limit {MAX_CEL_COMPREHENSION_DEPTH})"
    )]
    TooComplex {
        /// AST nodes.
        nodes: usize,
        /// Nested comprehension depth.
        depth: usize,
    },
    /// The rule does not parse.
    #[error("cel rule {rule:?} does not compile: {message}")]
    Parse {
        /// The rule.
        rule: String,
        /// The parser's message.
        message: String,
    },
    /// The rule names a variable other than `properties`.
    #[error("cel rule {rule:?}: undeclared reference to {name:?}")]
    UndeclaredReference {
        /// The rule.
        rule: String,
        /// The unknown name.
        name: String,
    },
    /// The rule's type is not `bool` (upstream's type checker refuses it at
    /// compile time, with this message).
    #[error("cel expressions must have type Bool")]
    NotBoolType {
        /// The rule.
        rule: String,
        /// The type it has (`int`, `dyn`, ...).
        got: &'static str,
    },
    /// The rule yields something other than a boolean.
    #[error("cel rule {rule:?} must evaluate to a boolean, got {got}")]
    NotBoolean {
        /// The rule.
        rule: String,
        /// What it yielded.
        got: String,
    },
    /// The rule's estimated cost on one candidate exceeds [`MAX_CEL_COST`].
    #[error(
        "cel rule {rule:?} would take up to {cost} steps, more than the limit of {MAX_CEL_COST}"
    )]
    TooCostly {
        /// The rule.
        rule: String,
        /// The estimate.
        cost: u128,
    },
    /// Evaluation failed (counts as "no match").
    #[error("cel rule {rule:?} failed: {message}")]
    Evaluation {
        /// The rule.
        rule: String,
        /// The error.
        message: String,
    },
}

/// A compiled CEL rule.
pub struct CelRule {
    source: String,
    program: Program,
    nodes: usize,
    depth: usize,
    literal_width: usize,
    concatenations: usize,
}

impl std::fmt::Debug for CelRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelRule")
            .field("source", &self.source)
            .field("nodes", &self.nodes)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shape {
    nodes: usize,
    depth: usize,
    literal_width: usize,
    concatenations: usize,
    unknown: Option<String>,
}

fn walk(e: &IdedExpr, depth: usize, bound: &mut Vec<String>, shape: &mut Shape) {
    shape.nodes += 1;
    shape.depth = shape.depth.max(depth);
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => {}
        Expr::Ident(name) => {
            if name != PROPERTIES_VARIABLE
                && !bound.iter().any(|b| b == name)
                && shape.unknown.is_none()
            {
                shape.unknown = Some(name.clone());
            }
        }
        Expr::Call(call) => {
            if call.func_name == "_+_" {
                shape.concatenations += 1;
            }
            if let Some(t) = &call.target {
                walk(t, depth, bound, shape);
            }
            for a in &call.args {
                walk(a, depth, bound, shape);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, depth, bound, shape);
            walk(&c.accu_init, depth, bound, shape);
            bound.push(c.iter_var.clone());
            if let Some(v) = &c.iter_var2 {
                bound.push(v.clone());
            }
            bound.push(c.accu_var.clone());
            walk(&c.loop_cond, depth + 1, bound, shape);
            walk(&c.loop_step, depth + 1, bound, shape);
            walk(&c.result, depth, bound, shape);
            bound.pop();
            if c.iter_var2.is_some() {
                bound.pop();
            }
            bound.pop();
        }
        Expr::List(l) => {
            shape.literal_width = shape.literal_width.max(l.elements.len());
            for x in &l.elements {
                walk(x, depth, bound, shape);
            }
        }
        Expr::Map(m) => {
            shape.literal_width = shape.literal_width.max(m.entries.len());
            for x in &m.entries {
                match &x.expr {
                    EntryExpr::MapEntry(me) => {
                        walk(&me.key, depth, bound, shape);
                        walk(&me.value, depth, bound, shape);
                    }
                    EntryExpr::StructField(sf) => walk(&sf.value, depth, bound, shape),
                }
            }
        }
        Expr::Select(s) => walk(&s.operand, depth, bound, shape),
        Expr::Struct(s) => {
            for x in &s.entries {
                if let EntryExpr::StructField(sf) = &x.expr {
                    walk(&sf.value, depth, bound, shape);
                }
            }
        }
    }
}

/// A CEL type, as far as upstream's checker would know it statically.
/// `Unknown` is what this inference cannot tell (a function it does not
/// know): such rules are let through, and evaluation still requires a bool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List,
    Map,
    Dyn,
    Unknown,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Int => "int",
            Self::Uint => "uint",
            Self::Double => "double",
            Self::String => "string",
            Self::Bytes => "bytes",
            Self::Null => "null_type",
            Self::List => "list",
            Self::Map => "map",
            Self::Dyn => "dyn",
            Self::Unknown => "unknown",
        }
    }
}

/// The static type of `e` under upstream's environment: `properties` is
/// `list(map(string, dyn))`, so anything read out of it is `dyn`; operators
/// and the standard functions have their declared result types;
/// comprehensions (the macros) have their result's type.
fn infer(e: &IdedExpr, vars: &mut Vec<(String, Ty)>) -> Ty {
    use cel::common::ast::LiteralValue;
    match &e.expr {
        Expr::Unspecified => Ty::Unknown,
        Expr::Literal(literal) => match literal {
            LiteralValue::Boolean(_) => Ty::Bool,
            LiteralValue::Bytes(_) => Ty::Bytes,
            LiteralValue::Double(_) => Ty::Double,
            LiteralValue::Int(_) => Ty::Int,
            LiteralValue::Null => Ty::Null,
            LiteralValue::String(_) => Ty::String,
            LiteralValue::UInt(_) => Ty::Uint,
        },
        Expr::Ident(name) => {
            if let Some((_, ty)) = vars.iter().rev().find(|(n, _)| n == name) {
                *ty
            } else if name == PROPERTIES_VARIABLE {
                Ty::List
            } else {
                Ty::Unknown
            }
        }
        Expr::List(_) => Ty::List,
        Expr::Map(_) => Ty::Map,
        Expr::Struct(_) => Ty::Unknown,
        // `has(x.f)` is a test; a field of a map of dyn is dyn.
        Expr::Select(select) if select.test => Ty::Bool,
        Expr::Select(select) => match infer(&select.operand, vars) {
            Ty::Unknown => Ty::Unknown,
            _ => Ty::Dyn,
        },
        Expr::Comprehension(c) => {
            let accumulator = infer(&c.accu_init, vars);
            vars.push((c.iter_var.clone(), Ty::Dyn));
            if let Some(v) = &c.iter_var2 {
                vars.push((v.clone(), Ty::Dyn));
            }
            vars.push((c.accu_var.clone(), accumulator));
            let result = infer(&c.result, vars);
            vars.pop();
            if c.iter_var2.is_some() {
                vars.pop();
            }
            vars.pop();
            result
        }
        Expr::Call(call) => {
            let arg = |i: usize, vars: &mut Vec<(String, Ty)>| {
                call.args.get(i).map_or(Ty::Unknown, |a| infer(a, vars))
            };
            match call.func_name.as_str() {
                "_==_"
                | "_!=_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "_&&_"
                | "_||_"
                | "!_"
                | "@in"
                | "@not_strictly_false"
                | "contains"
                | "startsWith"
                | "endsWith"
                | "matches"
                | "bool" => Ty::Bool,
                "size" | "int" | SEMVER_COMPARE => Ty::Int,
                "uint" => Ty::Uint,
                "double" => Ty::Double,
                "string" => Ty::String,
                "bytes" => Ty::Bytes,
                "dyn" => Ty::Dyn,
                "_[_]" => match arg(0, vars) {
                    Ty::List | Ty::Map | Ty::Dyn => Ty::Dyn,
                    _ => Ty::Unknown,
                },
                "_?_:_" => {
                    let (then, otherwise) = (arg(1, vars), arg(2, vars));
                    if then == otherwise {
                        then
                    } else if then == Ty::Unknown || otherwise == Ty::Unknown {
                        Ty::Unknown
                    } else {
                        Ty::Dyn
                    }
                }
                "_+_" | "_-_" | "_*_" | "_/_" | "_%_" => {
                    let (a, b) = (arg(0, vars), arg(1, vars));
                    match (a, b) {
                        (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
                        // `dyn + int` can only be `int + int`.
                        (Ty::Dyn, other) | (other, Ty::Dyn) => other,
                        (a, _) => a,
                    }
                }
                "-_" => arg(0, vars),
                _ => Ty::Unknown,
            }
        }
    }
}

/// The standard environment, built once: building it registers every
/// standard function, which costs more than most evaluations.
fn environment() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib())).clone()
}

fn semver_compare(a: Arc<String>, b: Arc<String>) -> Result<i64, ExecutionError> {
    let parse =
        |s: &str| Version::parse(s).map_err(|e| ExecutionError::function_error(SEMVER_COMPARE, e));
    let (a, b) = (parse(&a)?, parse(&b)?);
    Ok(match a.cmp_precedence(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })
}

fn json_to_cel(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(a) => Value::List(Arc::new(a.iter().map(json_to_cel).collect())),
        serde_json::Value::Object(o) => {
            let map: std::collections::HashMap<String, Value> =
                o.iter().map(|(k, v)| (k.clone(), json_to_cel(v))).collect();
            Value::from(map)
        }
    }
}

/// The widest list or map anywhere in `v`.
fn widest(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(a) => a.iter().map(widest).max().unwrap_or(0).max(a.len()),
        serde_json::Value::Object(o) => o.values().map(widest).max().unwrap_or(0).max(o.len()),
        _ => 0,
    }
}

impl CelRule {
    /// Compiles `rule`, enforcing the static limits.
    pub fn compile(rule: &str) -> Result<Self, CelError> {
        if rule.len() > MAX_CEL_RULE_BYTES {
            return Err(CelError::TooLong { len: rule.len() });
        }
        let program = environment().compile(rule).map_err(|e| CelError::Parse {
            rule: rule.to_owned(),
            message: e.to_string(),
        })?;
        let mut shape = Shape::default();
        walk(program.expression(), 0, &mut Vec::new(), &mut shape);
        if let Some(name) = shape.unknown {
            return Err(CelError::UndeclaredReference {
                rule: rule.to_owned(),
                name,
            });
        }
        if shape.nodes > MAX_CEL_NODES || shape.depth > MAX_CEL_COMPREHENSION_DEPTH {
            return Err(CelError::TooComplex {
                nodes: shape.nodes,
                depth: shape.depth,
            });
        }
        match infer(program.expression(), &mut Vec::new()) {
            Ty::Bool | Ty::Unknown => {}
            other => {
                return Err(CelError::NotBoolType {
                    rule: rule.to_owned(),
                    got: other.name(),
                });
            }
        }
        Ok(Self {
            source: rule.to_owned(),
            program,
            nodes: shape.nodes,
            depth: shape.depth,
            literal_width: shape.literal_width,
            concatenations: shape.concatenations,
        })
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The worst-case number of steps on a candidate with `properties`.
    pub fn estimated_cost(&self, properties: &[RawProperty]) -> u128 {
        let values: Vec<serde_json::Value> = properties.iter().map(RawProperty::decoded).collect();
        self.cost_of(&values)
    }

    fn cost_of(&self, values: &[serde_json::Value]) -> u128 {
        let properties = values;
        let input_width = properties
            .iter()
            .map(widest)
            .max()
            .unwrap_or(0)
            .max(properties.len())
            .max(self.literal_width)
            .max(1);
        // Lists only grow beyond the input by concatenation (`+`); `map`
        // and `filter` never lengthen one.
        let width = (input_width as u128) * (self.concatenations as u128 + 1) + 1;
        let depth = u32::try_from(self.depth).unwrap_or(u32::MAX);
        (self.nodes as u128).saturating_mul(width.saturating_pow(depth))
    }

    /// Evaluates the rule against a candidate's properties.
    pub fn evaluate(&self, properties: &[RawProperty]) -> Result<bool, CelError> {
        let values: Vec<serde_json::Value> = properties.iter().map(RawProperty::decoded).collect();
        let cost = self.cost_of(&values);
        if cost > MAX_CEL_COST {
            return Err(CelError::TooCostly {
                rule: self.source.clone(),
                cost,
            });
        }
        let list: Vec<Value> = properties
            .iter()
            .zip(&values)
            .map(|(p, value)| {
                let mut m = std::collections::HashMap::new();
                m.insert(
                    "type".to_owned(),
                    Value::String(Arc::new(p.type_.to_string())),
                );
                m.insert("value".to_owned(), json_to_cel(value));
                Value::from(m)
            })
            .collect();
        let mut context = Context::with_env(environment());
        context.add_variable_from_value(PROPERTIES_VARIABLE, Value::List(Arc::new(list)));
        context
            .add_function(SEMVER_COMPARE, semver_compare)
            .map_err(|e| CelError::Evaluation {
                rule: self.source.clone(),
                message: e.to_string(),
            })?;
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotBoolean {
                rule: self.source.clone(),
                got: format!("{other:?}"),
            }),
            Err(e) => Err(CelError::Evaluation {
                rule: self.source.clone(),
                message: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(json: &[(&str, &str)]) -> Vec<RawProperty> {
        json.iter()
            .map(|(t, v)| RawProperty::new(Arc::from(*t), v).unwrap())
            .collect()
    }

    #[test]
    fn upstream_examples_evaluate() {
        let p = props(&[
            ("olm.package", r#"{"packageName":"etcd","version":"1.2.0"}"#),
            ("certified", "true"),
        ]);
        let cases = [
            (
                r#"properties.exists(p, p.type == "certified" && p.value == true)"#,
                true,
            ),
            (
                r#"properties.exists(p, p.type == "certified" && p.value == false)"#,
                false,
            ),
            (
                r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "1.0.0") == 1)"#,
                true,
            ),
            (
                r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "2.0.0") >= 0)"#,
                false,
            ),
        ];
        for (rule, want) in cases {
            let r = CelRule::compile(rule).unwrap();
            assert_eq!(r.evaluate(&p).unwrap(), want, "{rule}");
        }
    }

    #[test]
    fn runtime_errors_and_non_booleans_are_errors() {
        let p = props(&[("x", "1")]);
        let r = CelRule::compile(r#"semver_compare("not-a-version", "1.0.0") == 0"#).unwrap();
        assert!(matches!(r.evaluate(&p), Err(CelError::Evaluation { .. })));
        // A rule whose type this checker cannot tell is still held to a
        // boolean when it runs.
        let r = CelRule::compile("type(1)").unwrap();
        let got = r.evaluate(&p);
        assert!(matches!(got, Err(CelError::NotBoolean { .. })), "{got:?}");
    }

    #[test]
    fn rules_must_type_check_to_bool_as_upstream_s_checker_says() {
        for (rule, got) in [
            ("1 + 1", "int"),
            ("'a' + 'b'", "string"),
            ("properties", "list"),
            ("properties[0].value", "dyn"),
            ("properties.map(p, p.type)", "list"),
            ("size(properties)", "int"),
            (r#"semver_compare("1.0.0", "2.0.0")"#, "int"),
            ("true ? 1 : 2", "int"),
            ("true ? 1 : 'x'", "dyn"),
            ("1.5", "double"),
            ("null", "null_type"),
        ] {
            match CelRule::compile(rule) {
                Err(error @ CelError::NotBoolType { got: found, .. }) => {
                    assert_eq!(found, got, "{rule}");
                    assert_eq!(error.to_string(), "cel expressions must have type Bool");
                }
                other => panic!("{rule}: {other:?}"),
            }
        }
        for rule in [
            "true",
            "properties.exists(p, p.type == 'olm.package')",
            "properties.all(p, p.type != 'x')",
            "properties.exists_one(p, p.type == 'olm.package')",
            r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "1.0.0") >= 0)"#,
            "has(properties[0].value)",
            "'a' in ['a', 'b']",
            "size(properties) > 0 || !false",
            "properties[0].value.packageName.startsWith('x')",
            "true ? true : false",
            "bool('true')",
        ] {
            assert!(CelRule::compile(rule).is_ok(), "{rule}");
        }
    }

    #[test]
    fn limits_are_enforced() {
        let long = "true && ".repeat(MAX_CEL_RULE_BYTES / 8 + 1) + "true";
        assert!(matches!(
            CelRule::compile(&long),
            Err(CelError::TooLong { .. })
        ));
        let many = vec!["1"; MAX_CEL_NODES].join(" + ") + " > 0";
        assert!(many.len() <= MAX_CEL_RULE_BYTES);
        assert!(matches!(
            CelRule::compile(&many),
            Err(CelError::TooComplex { .. })
        ));
        let deep =
            "properties.all(a, properties.all(b, properties.all(c, properties.all(d, true))))";
        assert!(matches!(
            CelRule::compile(deep),
            Err(CelError::TooComplex { depth: 4, .. })
        ));
        assert!(matches!(
            CelRule::compile("nope == 1"),
            Err(CelError::UndeclaredReference { .. })
        ));
        assert!(matches!(
            CelRule::compile("(("),
            Err(CelError::Parse { .. })
        ));
    }

    #[test]
    fn cost_bound_refuses_wide_inputs_for_nested_rules() {
        let rule = CelRule::compile(
            "properties.all(a, properties.all(b, properties.all(c, a.type != \"\" && b.type != c.type + \"x\")))",
        )
        .unwrap();
        let small = props(&[("a", "1"), ("b", "2")]);
        assert!(rule.evaluate(&small).unwrap());
        let wide: Vec<(&str, &str)> = vec![("t", "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]"); 256];
        let wide = props(&wide);
        assert!(rule.estimated_cost(&wide) > MAX_CEL_COST);
        assert!(matches!(
            rule.evaluate(&wide),
            Err(CelError::TooCostly { .. })
        ));
    }
}
