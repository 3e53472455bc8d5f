//! The solver: upstream's constraint vocabulary (Mandatory, Prohibited,
//! Dependency, Conflict, AtMost 1) over variables, encoded to CNF for the
//! `batsat` CDCL solver, and upstream's preference search on top.
//!
//! Encoding: one boolean per variable, and one *activation literal* per
//! applied constraint, added to each of its clauses (`¬a ∨ …`):
//!
//! * Mandatory(x): `¬a ∨ x`; Prohibited(x): `¬a ∨ ¬x`;
//! * Dependency(x; c1…cn): `¬a ∨ ¬x ∨ c1 ∨ … ∨ cn`;
//! * Conflict(x, y): `¬a ∨ ¬x ∨ ¬y`;
//! * AtMost(1; x1…xn): pairwise `¬a ∨ ¬xi ∨ ¬xj` up to
//!   [`PAIRWISE_AT_MOST_LIMIT`] literals, otherwise a sequential counter
//!   (Sinz 2005) with n-1 auxiliary variables and 3n clauses.
//!
//! The search runs on the plain clauses. When the input is unsatisfiable it
//! is encoded again with the activation literals, and a solve that assumes
//! all of them yields a *core* of activation literals: the constraints that
//! conflict.
//! The core is shrunk by deletion (drop one constraint, re-solve, keep it out
//! if still unsatisfiable) to a minimal set before it is reported.
//!
//! Search (upstream's `solver/search.go`, replicated): the anchors (subjects
//! of Mandatory constraints) are queued as single-candidate choices; taking a
//! choice assumes its first candidate that is consistent with the assumptions
//! so far and queues that candidate's Dependency constraints, in order, at
//! the back. A choice already satisfied by an earlier guess adds nothing.
//! Upstream tests each guess with unit propagation and backtracks
//! chronologically on a later failure; testing each guess with a complete
//! solve instead prunes exactly the subtrees that contain no solution, so the
//! first solution found in upstream's lexicographic order is the same, and
//! no backtracking is needed. Upstream then minimizes the number of selected
//! variables outside the guesses; outside the guesses nothing is forced
//! true, so that minimum is always zero and the answer is the guess set.

use std::collections::VecDeque;

use batsat::{BasicSolver, Lit, SolverInterface, Var, lbool};

/// AtMost constraints over at most this many literals use pairwise clauses.
pub const PAIRWISE_AT_MOST_LIMIT: usize = 6;

/// Index of a variable of a [`Problem`].
pub(crate) type VarId = usize;

/// What an applied constraint requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The subject is selected.
    Mandatory,
    /// The subject is not selected.
    Prohibited,
    /// If the subject is selected, so is one of these (in preference order).
    Dependency(Vec<VarId>),
    /// The subject and this variable are not both selected.
    Conflict(VarId),
    /// At most one of these is selected (the subject is informational).
    AtMostOne(Vec<VarId>),
}

/// A constraint applied to a subject, with the message that explains it.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub subject: VarId,
    pub rule: Rule,
    pub message: String,
}

/// Variables and constraints.
#[derive(Debug, Default, Clone)]
pub(crate) struct Problem {
    /// Upstream identifiers of the variables.
    pub names: Vec<String>,
    pub constraints: Vec<Applied>,
}

/// The result of [`Problem::solve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The selected variables, in the order they were chosen.
    Selected(Vec<VarId>),
    /// A minimal set of conflicting constraints (indexes into
    /// `constraints`, ascending).
    Conflicts(Vec<usize>),
}

impl Problem {
    pub(crate) fn add_var(&mut self, name: String) -> VarId {
        self.names.push(name);
        self.names.len() - 1
    }

    pub(crate) fn add(&mut self, subject: VarId, rule: Rule, message: String) {
        self.constraints.push(Applied {
            subject,
            rule,
            message,
        });
    }

    /// Whether `selected` (one flag per variable) satisfies constraint `c`.
    #[cfg(test)]
    pub(crate) fn satisfies(&self, c: &Applied, selected: &[bool]) -> bool {
        let s = selected[c.subject];
        match &c.rule {
            Rule::Mandatory => s,
            Rule::Prohibited => !s,
            Rule::Dependency(cands) => !s || cands.iter().any(|&x| selected[x]),
            Rule::Conflict(o) => !(s && selected[*o]),
            Rule::AtMostOne(xs) => xs.iter().filter(|&&x| selected[x]).count() <= 1,
        }
    }

    /// Solves the problem with upstream's preferences.
    pub(crate) fn solve(&self) -> Outcome {
        let mut enc = Encoded::new(self, false);
        if !enc.solve(&[]) {
            // Only an explanation needs to know which constraints take
            // part: encode again with activation literals.
            let mut guarded = Encoded::new(self, true);
            let unsat = !guarded.solve(&[]);
            debug_assert!(unsat, "the guarded encoding must agree");
            return Outcome::Conflicts(guarded.minimal_core(&self.constraints));
        }
        let mut model = enc.model();
        let mut guessed = vec![false; self.names.len()];
        let mut order = Vec::new();
        let mut guesses: Vec<Lit> = Vec::new();
        let mut deps_of: Vec<Vec<usize>> = vec![Vec::new(); self.names.len()];
        for (i, c) in self.constraints.iter().enumerate() {
            if let Rule::Dependency(cands) = &c.rule
                && !cands.is_empty()
            {
                deps_of[c.subject].push(i);
            }
        }
        let mut queue: VecDeque<&[VarId]> = VecDeque::new();
        let mut anchor_seen = vec![false; self.names.len()];
        for c in &self.constraints {
            if c.rule == Rule::Mandatory && !anchor_seen[c.subject] {
                anchor_seen[c.subject] = true;
                queue.push_back(std::slice::from_ref(&c.subject));
            }
        }
        while let Some(choice) = queue.pop_front() {
            if choice.iter().any(|&x| guessed[x]) {
                continue;
            }
            let mut taken = None;
            for &x in choice {
                if model[x] {
                    taken = Some(x);
                    break;
                }
                guesses.push(enc.lit(x));
                if enc.solve(&guesses) {
                    model = enc.model();
                    taken = Some(x);
                    break;
                }
                guesses.pop();
            }
            let Some(x) = taken else {
                // Unreachable when the assumptions so far are consistent; as
                // upstream, an exhausted choice adds no guess.
                continue;
            };
            if guesses.last() != Some(&enc.lit(x)) {
                guesses.push(enc.lit(x));
            }
            guessed[x] = true;
            order.push(x);
            for &d in &deps_of[x] {
                if let Rule::Dependency(cands) = &self.constraints[d].rule {
                    queue.push_back(cands);
                }
            }
        }
        Outcome::Selected(order)
    }
}

struct Encoded {
    solver: BasicSolver,
    vars: Vec<Var>,
    activations: Vec<Lit>,
}

impl Encoded {
    /// Encodes `problem`; with `guarded`, every constraint's clauses carry
    /// its activation literal, so cores name constraints (solving then
    /// assumes every activation literal, which costs one decision level
    /// each, so the search itself runs unguarded).
    fn new(problem: &Problem, guarded: bool) -> Self {
        let mut solver = BasicSolver::default();
        // The most preferred candidate of each Dependency is decided true
        // first, everything else false: models then tend to hold the
        // choices the search is about to make, which saves it a solve per
        // choice (the model is only ever used as a witness, so this changes
        // speed, never the answer).
        let mut preferred = vec![false; problem.names.len()];
        for c in &problem.constraints {
            if let Rule::Dependency(cands) = &c.rule
                && let Some(&first) = cands.first()
            {
                preferred[first] = true;
            }
        }
        let vars: Vec<Var> = preferred
            .iter()
            .map(|&p| solver.new_var(if p { lbool::TRUE } else { lbool::FALSE }, true))
            .collect();
        let mut enc = Self {
            solver,
            vars,
            activations: Vec::with_capacity(problem.constraints.len()),
        };
        let mut clause = Vec::new();
        for c in &problem.constraints {
            let a = guarded.then(|| Lit::new(enc.solver.new_var(lbool::TRUE, true), true));
            enc.activations.extend(a);
            let s = enc.lit(c.subject);
            let mut add = |solver: &mut BasicSolver, lits: &[Lit]| {
                clause.clear();
                clause.extend(a.map(|a| !a));
                clause.extend_from_slice(lits);
                solver.add_clause_reuse(&mut clause);
            };
            match &c.rule {
                Rule::Mandatory => add(&mut enc.solver, &[s]),
                Rule::Prohibited => add(&mut enc.solver, &[!s]),
                Rule::Dependency(cands) => {
                    let mut lits = vec![!s];
                    lits.extend(cands.iter().map(|&x| Lit::new(enc.vars[x], true)));
                    add(&mut enc.solver, &lits);
                }
                Rule::Conflict(o) => {
                    let o = Lit::new(enc.vars[*o], true);
                    add(&mut enc.solver, &[!s, !o]);
                }
                Rule::AtMostOne(xs) => {
                    let xs: Vec<Lit> = xs.iter().map(|&x| Lit::new(enc.vars[x], true)).collect();
                    if xs.len() <= PAIRWISE_AT_MOST_LIMIT {
                        for i in 0..xs.len() {
                            for j in i + 1..xs.len() {
                                add(&mut enc.solver, &[!xs[i], !xs[j]]);
                            }
                        }
                    } else {
                        // Sequential counter: s_i means "one of x_0..=x_i".
                        let counters: Vec<Lit> = (0..xs.len() - 1)
                            .map(|_| Lit::new(enc.solver.new_var(lbool::FALSE, true), true))
                            .collect();
                        for i in 0..xs.len() {
                            if i < xs.len() - 1 {
                                add(&mut enc.solver, &[!xs[i], counters[i]]);
                            }
                            if i > 0 {
                                add(&mut enc.solver, &[!xs[i], !counters[i - 1]]);
                                if i < xs.len() - 1 {
                                    add(&mut enc.solver, &[!counters[i - 1], counters[i]]);
                                }
                            }
                        }
                    }
                }
            }
        }
        enc
    }

    fn lit(&self, x: VarId) -> Lit {
        Lit::new(self.vars[x], true)
    }

    /// Solves under every activation literal plus `extra`.
    fn solve(&mut self, extra: &[Lit]) -> bool {
        let mut assumptions = self.activations.clone();
        assumptions.extend_from_slice(extra);
        self.solver.solve_limited(&assumptions) == lbool::TRUE
    }

    fn model(&self) -> Vec<bool> {
        let model = self.solver.get_model();
        self.vars
            .iter()
            .map(|v| model.get(v.idx() as usize) == Some(&lbool::TRUE))
            .collect()
    }

    /// The constraints whose activation literals are in the last core.
    fn core(&self, among: &[usize]) -> Vec<usize> {
        among
            .iter()
            .copied()
            .filter(|&i| {
                self.solver
                    .unsat_core_contains_var(self.activations[i].var())
            })
            .collect()
    }

    /// A minimal unsatisfiable subset of the constraints, by deletion.
    ///
    /// Where a subject has several constraints that would each complete
    /// the conflict (two requirements nothing provides), upstream's solver
    /// blames the last one added (gini under OLM v0.46, seen through the
    /// differential tests). So the solver's first core is widened to every
    /// constraint of its subjects, and deletion runs in the order the
    /// constraints were added: an earlier one goes while a later one can
    /// take its place.
    fn minimal_core(&mut self, constraints: &[Applied]) -> Vec<usize> {
        let all: Vec<usize> = (0..self.activations.len()).collect();
        let first = self.core(&all);
        let subjects: std::collections::HashSet<VarId> =
            first.iter().map(|&c| constraints[c].subject).collect();
        let mut core: Vec<usize> = all
            .into_iter()
            .filter(|&c| first.contains(&c) || subjects.contains(&constraints[c].subject))
            .collect();
        let mut i = 0;
        while i < core.len() {
            let trial: Vec<usize> = core
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &c)| c)
                .collect();
            let lits: Vec<Lit> = trial.iter().map(|&c| self.activations[c]).collect();
            if self.solver.solve_limited(&lits) == lbool::FALSE {
                // Still unsatisfiable without constraint i: keep the smaller
                // core the solver reports.
                let smaller = self.core(&trial);
                core = if smaller.is_empty() { trial } else { smaller };
            } else {
                i += 1;
            }
        }
        core
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(n: usize) -> Problem {
        let mut p = Problem::default();
        for i in 0..n {
            p.add_var(format!("v{i}"));
        }
        p
    }

    #[test]
    fn preference_order_picks_first_consistent_candidate() {
        let mut p = problem(4);
        p.add(0, Rule::Mandatory, "root".into());
        p.add(0, Rule::Dependency(vec![1, 2, 3]), "root needs".into());
        p.add(1, Rule::Prohibited, "1 prohibited".into());
        assert_eq!(p.solve(), Outcome::Selected(vec![0, 2]));
    }

    #[test]
    fn a_choice_satisfied_by_an_earlier_guess_adds_nothing() {
        let mut p = problem(4);
        p.add(0, Rule::Mandatory, "a".into());
        p.add(1, Rule::Mandatory, "b".into());
        p.add(0, Rule::Dependency(vec![2, 3]), "a needs".into());
        p.add(1, Rule::Dependency(vec![3, 2]), "b needs".into());
        // a's choice is taken first (BFS over anchors), so 2 is chosen and
        // b's choice is already satisfied by it.
        assert_eq!(p.solve(), Outcome::Selected(vec![0, 1, 2]));
    }

    #[test]
    fn conflicts_are_minimal() {
        let mut p = problem(12);
        p.add(0, Rule::Mandatory, "x".into());
        p.add(0, Rule::Dependency(vec![1]), "x needs 1".into());
        p.add(2, Rule::Mandatory, "y".into());
        p.add(2, Rule::Dependency(vec![3]), "y needs 3".into());
        p.add(
            1,
            Rule::AtMostOne([1].into_iter().chain(3..12).collect()),
            "one of 1, 3..12".into(),
        );
        p.add(5, Rule::Prohibited, "irrelevant".into());
        match p.solve() {
            Outcome::Conflicts(c) => assert_eq!(c, vec![0, 1, 2, 3, 4]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sequential_counter_allows_exactly_one() {
        let n = PAIRWISE_AT_MOST_LIMIT + 4;
        for chosen in 0..n {
            let mut p = problem(n);
            p.add(0, Rule::AtMostOne((0..n).collect()), "one".into());
            p.add(chosen, Rule::Mandatory, "pick".into());
            assert_eq!(p.solve(), Outcome::Selected(vec![chosen]));
            let other = (chosen + 1) % n;
            p.add(other, Rule::Mandatory, "pick another".into());
            assert!(matches!(p.solve(), Outcome::Conflicts(_)));
        }
    }
}
