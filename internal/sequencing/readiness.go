package sequencing

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"k8s.io/client-go/util/jsonpath"
)

// The annotations of Helm's HIP-0025 with which a chart replaces the default
// (kstatus) readiness of one of its resources by its own expressions. Each
// holds a JSON list of expressions such as ["{.succeeded} == 1"]; a resource
// is failed when any failure expression is true, otherwise ready when any
// success expression is true. Only both together take effect.
//
// An expression reads `{<jsonpath>} <operator> <value>`:
//
//   - <jsonpath> is a Kubernetes JSONPath evaluated against the object's
//     .status, so {.succeeded} reads .status.succeeded; filters such as
//     {.conditions[?(@.type=="Ready")].status} work. Missing fields yield
//     nothing rather than an error, because status fields appear over time.
//   - <operator> is one of == != < <= > >=.
//   - <value> is a number (-1, 2.5, 1e3), true or false, or a string, quoted
//     ("Complete", 'a b', taken as they are between the quotes, without
//     escapes) or bare (Complete, True). A bare string cannot contain
//     whitespace, quotes or operator characters: quote it instead. Ordering
//     operators need a number.
//
// Each value the jsonpath yields is compared with <value>; the expression is
// true when any of them satisfies the comparison (a jsonpath meant to pick
// one field yields one value, a wildcard or union may yield several). It is
// false when the jsonpath yields nothing, when the object has no status, and
// when the evaluation fails (an index beyond the end of a list, a filter on
// something that is not a list): those mostly mean that the status has not
// got there yet, and if it never does, the wait runs into its timeout. How a
// value compares:
//
//   - with a number: a status number, or a status string holding a JSON
//     number ("3", "0.5"), compares numerically; integers exactly, anything
//     else as float64;
//   - with true or false: a status boolean, or a status string that is
//     "true" or "false" in any case (Kubernetes condition statuses are
//     "True" and "False");
//   - with a string: a status string, exactly (case included);
//   - a scalar of another type is different from the value: == is false and
//     != true; ordering is false;
//   - null, an object or a list is neither equal nor different: the
//     expression is false whatever the operator, != included.
const (
	AnnotationReadinessSuccess = "helm.sh/readiness-success"
	AnnotationReadinessFailure = "helm.sh/readiness-failure"
)

// Verdict is what a Readiness concludes about a resource at one moment.
type Verdict int

const (
	// VerdictPending is the zero value: no expression is true (yet), so the
	// wait goes on.
	VerdictPending Verdict = iota
	// VerdictReady means a success expression is true and no failure one.
	VerdictReady
	// VerdictFailed means a failure expression is true, whatever the success
	// expressions say.
	VerdictFailed
)

// String returns the verdict's name, for logs and messages.
func (v Verdict) String() string {
	switch v {
	case VerdictPending:
		return "Pending"
	case VerdictReady:
		return "Ready"
	case VerdictFailed:
		return "Failed"
	default:
		return fmt.Sprintf("Verdict(%d)", int(v))
	}
}

// Readiness is a resource's custom readiness: the parsed expressions of both
// annotations. It does not change after ParseReadiness and is safe for
// concurrent use.
type Readiness struct {
	success []*readinessExpression
	failure []*readinessExpression
}

// ParseReadiness reads the readiness annotations of one resource. It returns
// a nil Readiness when the default (kstatus) readiness applies: when neither
// annotation is set, and when only one is, in which case warning says which
// one is missing. The lone annotation is not parsed: it has no effect, and a
// chart that installs with Helm should not fail here for it.
//
// An annotation that is not a non-empty JSON list of strings, or holds an
// expression that does not parse, is an error naming the annotation and the
// expression; the caller adds which resource it is on.
func ParseReadiness(annotations map[string]string) (r *Readiness, warning string, err error) {
	successValue, hasSuccess := annotations[AnnotationReadinessSuccess]
	failureValue, hasFailure := annotations[AnnotationReadinessFailure]
	switch {
	case !hasSuccess && !hasFailure:
		return nil, "", nil
	case !hasFailure:
		return nil, loneAnnotationWarning(AnnotationReadinessSuccess, AnnotationReadinessFailure), nil
	case !hasSuccess:
		return nil, loneAnnotationWarning(AnnotationReadinessFailure, AnnotationReadinessSuccess), nil
	}

	success, err := parseReadinessAnnotation(AnnotationReadinessSuccess, successValue)
	if err != nil {
		return nil, "", err
	}
	failure, err := parseReadinessAnnotation(AnnotationReadinessFailure, failureValue)
	if err != nil {
		return nil, "", err
	}
	return &Readiness{success: success, failure: failure}, "", nil
}

func loneAnnotationWarning(present, missing string) string {
	return fmt.Sprintf("annotation %s is set but %s is missing: custom readiness needs both, so %s is ignored and the default readiness applies",
		present, missing, present)
}

// Evaluate judges an object (an unstructured.Unstructured's Object) by its
// .status. For VerdictReady and VerdictFailed it also returns the expression
// that decided, as written in the annotation, for messages such as
// `failure condition "{.failed} >= 1" is true`. Failure expressions are
// evaluated first, so a failure wins over a success. A nil Readiness, like an
// object without status, is pending.
func (r *Readiness) Evaluate(obj map[string]any) (Verdict, string) {
	if r == nil {
		return VerdictPending, ""
	}
	status := obj["status"]
	if status == nil {
		return VerdictPending, ""
	}
	if decided := firstTrueExpression(r.failure, status); decided != nil {
		return VerdictFailed, decided.source
	}
	if decided := firstTrueExpression(r.success, status); decided != nil {
		return VerdictReady, decided.source
	}
	return VerdictPending, ""
}

func firstTrueExpression(expressions []*readinessExpression, status any) *readinessExpression {
	for _, expression := range expressions {
		if expression.isTrueFor(status) {
			return expression
		}
	}
	return nil
}

func parseReadinessAnnotation(annotation, value string) ([]*readinessExpression, error) {
	var sources []string
	if err := json.Unmarshal([]byte(value), &sources); err != nil {
		return nil, fmt.Errorf(`annotation %s: want a JSON list of strings such as ["{.succeeded} == 1"]: %w`, annotation, err)
	}
	// JSON null decodes to an empty list without error, and means as little.
	if len(sources) == 0 {
		return nil, fmt.Errorf("annotation %s: the list of expressions is empty", annotation)
	}
	expressions := make([]*readinessExpression, 0, len(sources))
	for _, source := range sources {
		expression, err := parseReadinessExpression(source)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: expression %q: %w", annotation, source, err)
		}
		expressions = append(expressions, expression)
	}
	return expressions, nil
}

// readinessExpression is one parsed `{<jsonpath>} <operator> <value>`.
type readinessExpression struct {
	// source is the expression as written, without surrounding whitespace.
	source   string
	operator comparisonOperator
	value    literal

	// pathMu serialises the use of path. A jsonpath.JSONPath keeps evaluation
	// state in itself and is not documented as safe for concurrent use;
	// evaluating one is cheap, so a lock costs less than parsing the path
	// again for every evaluation.
	pathMu sync.Mutex
	path   *jsonpath.JSONPath
}

func parseReadinessExpression(source string) (*readinessExpression, error) {
	text := strings.TrimSpace(source)
	if text == "" {
		return nil, errors.New("empty expression")
	}
	pathText, rest, err := splitJSONPath(text)
	if err != nil {
		return nil, err
	}
	operator, valueText, err := splitOperator(rest)
	if err != nil {
		return nil, err
	}
	value, err := parseLiteral(valueText)
	if err != nil {
		return nil, err
	}
	if err := value.checkOperator(operator); err != nil {
		return nil, err
	}
	path, err := compileJSONPath(pathText)
	if err != nil {
		return nil, err
	}
	return &readinessExpression{source: text, operator: operator, value: value, path: path}, nil
}

// splitJSONPath cuts the leading {jsonpath} off an expression. The closing
// brace is the one matching the opening brace, not counting braces that are
// nested, escaped or inside quoted strings, so that a filter such as
// [?(@.reason=="a}b")] does not end the path early and the == inside a
// filter is not taken for the comparison.
func splitJSONPath(text string) (path, rest string, err error) {
	if !strings.HasPrefix(text, "{") {
		return "", "", errors.New("want a {jsonpath} in braces first, as in {.succeeded} == 1")
	}
	depth := 0
	var quote rune // the open quote character, 0 outside quoted strings
	escaped := false
	for i, r := range text {
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '{':
			depth++
		case r == '}':
			depth--
			if depth == 0 {
				return text[:i+1], text[i+1:], nil
			}
		}
	}
	if quote != 0 {
		return "", "", fmt.Errorf("unterminated %c quote in the jsonpath", quote)
	}
	return "", "", errors.New("the jsonpath's opening { has no matching }")
}

// comparisonOperator is one of == != < <= > >=.
type comparisonOperator string

const (
	operatorEqual        comparisonOperator = "=="
	operatorNotEqual     comparisonOperator = "!="
	operatorLess         comparisonOperator = "<"
	operatorLessEqual    comparisonOperator = "<="
	operatorGreater      comparisonOperator = ">"
	operatorGreaterEqual comparisonOperator = ">="
)

// operatorsLongestFirst lists the two-character operators first, so that
// "<= 1" is not read as "<" followed by the value "= 1".
var operatorsLongestFirst = []comparisonOperator{
	operatorEqual, operatorNotEqual, operatorLessEqual, operatorGreaterEqual,
	operatorLess, operatorGreater,
}

func splitOperator(rest string) (comparisonOperator, string, error) {
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", "", errors.New("missing comparison after the jsonpath: want one of == != < <= > >= and a value")
	}
	for _, operator := range operatorsLongestFirst {
		if after, found := strings.CutPrefix(rest, string(operator)); found {
			value := strings.TrimSpace(after)
			if value == "" {
				return "", "", fmt.Errorf("missing value after %s", operator)
			}
			return operator, value, nil
		}
	}
	return "", "", fmt.Errorf("want one of == != < <= > >= after the jsonpath, got %q", rest)
}

func (o comparisonOperator) isOrdering() bool {
	return o != operatorEqual && o != operatorNotEqual
}

// comparison is how a status value relates to an expression's value.
type comparison int

const (
	// incomparable: null, an object or a list; no operator holds.
	incomparable comparison = iota
	less
	equal
	greater
	// different: not equal and not ordered, such as a string and a number.
	different
)

func (o comparisonOperator) holds(c comparison) bool {
	switch o {
	case operatorEqual:
		return c == equal
	case operatorNotEqual:
		return c == less || c == greater || c == different
	case operatorLess:
		return c == less
	case operatorLessEqual:
		return c == less || c == equal
	case operatorGreater:
		return c == greater
	case operatorGreaterEqual:
		return c == greater || c == equal
	default:
		return false
	}
}

type literalKind int

const (
	literalNumber literalKind = iota + 1
	literalBool
	literalString
)

// literal is an expression's <value>.
type literal struct {
	kind    literalKind
	number  number
	boolean bool
	text    string
}

// bareStringForbidden are the characters a bare string cannot contain:
// quotes, so that a stray one is not silently part of the value, and
// operator characters, so that a typo such as "=== 1" or "<> 1" is an error
// rather than a comparison with the string "= 1".
const bareStringForbidden = `"'=!<>{}`

func parseLiteral(text string) (literal, error) {
	switch {
	case text[0] == '"' || text[0] == '\'':
		return parseQuotedString(text)
	case text == "true" || text == "false":
		return literal{kind: literalBool, boolean: text == "true"}, nil
	case text == "null":
		return literal{}, errors.New("cannot compare with null: a missing or null field already makes the expression false")
	case jsonNumberPattern.MatchString(text):
		n, ok := parseNumber(text)
		if !ok {
			return literal{}, fmt.Errorf("number %s is out of range", text)
		}
		return literal{kind: literalNumber, number: n}, nil
	}
	if i := strings.IndexAny(text, bareStringForbidden); i >= 0 {
		return literal{}, fmt.Errorf("value %q contains %q: quote it", text, text[i:i+1])
	}
	if strings.IndexFunc(text, unicode.IsSpace) >= 0 {
		return literal{}, fmt.Errorf("value %q contains whitespace: quote it", text)
	}
	return literal{kind: literalString, text: text}, nil
}

// parseQuotedString takes what is between the quotes as it is: there are no
// escapes, so the value cannot contain its own quote character (use the
// other one).
func parseQuotedString(text string) (literal, error) {
	quote := text[0]
	inner := text[1:]
	end := strings.IndexByte(inner, quote)
	if end < 0 {
		return literal{}, fmt.Errorf("unterminated %c quote in value %s", quote, text)
	}
	if end != len(inner)-1 {
		return literal{}, fmt.Errorf("unexpected text after the quoted value in %s", text)
	}
	return literal{kind: literalString, text: inner[:end]}, nil
}

func (l literal) checkOperator(operator comparisonOperator) error {
	if !operator.isOrdering() || l.kind == literalNumber {
		return nil
	}
	if l.kind == literalBool {
		return fmt.Errorf("%s cannot order booleans: use == or !=", operator)
	}
	return fmt.Errorf("%s needs a number, not the string %q", operator, l.text)
}

// compare tells how a status value relates to the literal.
func (l literal) compare(value reflect.Value) comparison {
	value, ok := scalarOf(value)
	if !ok {
		return incomparable
	}
	switch l.kind {
	case literalNumber:
		n, ok := numberOf(value)
		if !ok {
			return different
		}
		return comparisonOf(compareNumbers(n, l.number))
	case literalBool:
		b, ok := boolOf(value)
		if !ok || b != l.boolean {
			return different
		}
		return equal
	case literalString:
		if value.Kind() != reflect.String || value.String() != l.text {
			return different
		}
		return equal
	default:
		return incomparable
	}
}

func comparisonOf(sign int) comparison {
	switch {
	case sign < 0:
		return less
	case sign > 0:
		return greater
	default:
		return equal
	}
}

// scalarOf looks through interfaces and pointers to the value they hold; ok
// is false for nil and for anything but booleans, numbers and strings.
func scalarOf(value reflect.Value) (reflect.Value, bool) {
	for value.IsValid() && (value.Kind() == reflect.Interface || value.Kind() == reflect.Pointer) {
		if value.IsNil() {
			return reflect.Value{}, false
		}
		value = value.Elem()
	}
	switch value.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return value, true
	default:
		return reflect.Value{}, false
	}
}

func boolOf(value reflect.Value) (bool, bool) {
	switch value.Kind() {
	case reflect.Bool:
		return value.Bool(), true
	case reflect.String:
		switch {
		case strings.EqualFold(value.String(), "true"):
			return true, true
		case strings.EqualFold(value.String(), "false"):
			return false, true
		}
	}
	return false, false
}

// number keeps integers as int64 so that large ones (counters, sizes,
// timestamps) compare exactly; anything else is a float64.
type number struct {
	isInteger bool
	integer   int64
	float     float64
}

func (n number) asFloat() float64 {
	if n.isInteger {
		return float64(n.integer)
	}
	return n.float
}

func compareNumbers(a, b number) int {
	if a.isInteger && b.isInteger {
		return cmp.Compare(a.integer, b.integer)
	}
	return cmp.Compare(a.asFloat(), b.asFloat())
}

// jsonNumberPattern is JSON's number syntax, for literals and for numbers in
// status strings alike. It keeps out what strconv would also take, such as
// "0x1p-2", "Inf", "NaN" or "1_000", which are not what a chart author or a
// controller means by a number.
var jsonNumberPattern = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

// parseNumber parses a JSON number; ok is false for anything else, and for a
// number beyond float64's range.
func parseNumber(text string) (n number, ok bool) {
	if !jsonNumberPattern.MatchString(text) {
		return number{}, false
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return number{isInteger: true, integer: i}, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return number{}, false
	}
	return number{float: f}, true
}

// numberOf reads a status number, or a status string holding a JSON number;
// ok is false for anything else, NaN included, as NaN is ordered with
// nothing.
func numberOf(value reflect.Value) (number, bool) {
	switch value.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return number{isInteger: true, integer: value.Int()}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := value.Uint()
		if u > math.MaxInt64 {
			return number{float: float64(u)}, true
		}
		return number{isInteger: true, integer: int64(u)}, true
	case reflect.Float32, reflect.Float64:
		f := value.Float()
		return number{float: f}, !math.IsNaN(f)
	case reflect.String:
		return parseNumber(value.String())
	default:
		return number{}, false
	}
}

// compileJSONPath parses the {jsonpath} once, when the annotation is parsed.
// It parses the text twice: once into a tree to check it, since a
// jsonpath.JSONPath does not expose its tree, and once into the JSONPath that
// evaluates it.
func compileJSONPath(braced string) (*jsonpath.JSONPath, error) {
	// Whitespace just inside the braces is fine for us, but the jsonpath
	// parser only skips spaces, not tabs or newlines.
	inner := strings.TrimSpace(braced[1 : len(braced)-1])
	if inner == "" {
		return nil, errors.New("empty jsonpath {}")
	}
	text := "{" + inner + "}"
	if err := checkJSONPath(text); err != nil {
		return nil, fmt.Errorf("jsonpath %s: %w", text, err)
	}
	path := jsonpath.New("readiness").AllowMissingKeys(true)
	if err := parseWithoutPanic(func() error { return path.Parse(text) }); err != nil {
		return nil, fmt.Errorf("jsonpath %s: %w", text, err)
	}
	return path, nil
}

// checkJSONPath parses text and rejects what parses but makes no sense in a
// readiness expression.
func checkJSONPath(text string) error {
	var parser *jsonpath.Parser
	err := parseWithoutPanic(func() error {
		var err error
		parser, err = jsonpath.Parse("readiness", text)
		return err
	})
	if err != nil {
		return err
	}
	// Our {…} must be the parser's one action: its closing brace, not an
	// earlier one the parser found, must end the path.
	if len(parser.Root.Nodes) != 1 || parser.Root.Nodes[0].Type() != jsonpath.NodeList {
		return errors.New("want a single {…} path")
	}
	return rejectIdentifiers(parser.Root)
}

// rejectIdentifiers finds identifiers anywhere in the tree, filters
// included. The only ones jsonpath knows are range and end, which template
// a list of values into text: nothing a comparison needs, and evaluating
// range rewrites the parsed path in place, so that the next evaluation would
// run another one. Any other identifier fails every evaluation.
func rejectIdentifiers(node jsonpath.Node) error {
	if identifier, ok := node.(*jsonpath.IdentifierNode); ok {
		return fmt.Errorf("%q is not supported in a readiness jsonpath", identifier.Name)
	}
	for _, child := range jsonPathChildren(node) {
		if err := rejectIdentifiers(child); err != nil {
			return err
		}
	}
	return nil
}

func jsonPathChildren(node jsonpath.Node) []jsonpath.Node {
	switch node := node.(type) {
	case *jsonpath.ListNode:
		return node.Nodes
	case *jsonpath.FilterNode:
		return []jsonpath.Node{node.Left, node.Right}
	case *jsonpath.UnionNode:
		children := make([]jsonpath.Node, 0, len(node.Nodes))
		for _, list := range node.Nodes {
			children = append(children, list)
		}
		return children
	default:
		return nil
	}
}

// parseWithoutPanic turns a panic of the jsonpath parser into an error: the
// expressions come from charts, which are not trusted to be well-formed, and
// a malformed one must fail the release, not the controller.
func parseWithoutPanic(parse func() error) (err error) {
	defer func() {
		if recovered := recover(); recovered != nil {
			err = fmt.Errorf("cannot parse: %v", recovered)
		}
	}()
	return parse()
}

// isTrueFor tells whether any value the jsonpath yields from status
// satisfies the comparison.
func (e *readinessExpression) isTrueFor(status any) bool {
	values, err := e.findValues(status)
	if err != nil {
		return false
	}
	for _, value := range values {
		if e.operator.holds(e.value.compare(value)) {
			return true
		}
	}
	return false
}

// findValues evaluates the jsonpath against status. A panic in the jsonpath
// evaluator on a strangely shaped status becomes an error, so false, like
// the evaluator's own errors.
func (e *readinessExpression) findValues(status any) (values []reflect.Value, err error) {
	e.pathMu.Lock()
	defer e.pathMu.Unlock()
	defer func() {
		if recovered := recover(); recovered != nil {
			err = fmt.Errorf("evaluating jsonpath: %v", recovered)
		}
	}()
	results, err := e.path.FindResults(status)
	if err != nil {
		return nil, err
	}
	for _, result := range results {
		values = append(values, result...)
	}
	return values, nil
}
