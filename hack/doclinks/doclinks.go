// Package doclinks checks that the relative links of the repository's
// Markdown pages lead somewhere: to a file or directory that exists and,
// when the link names a #fragment of a Markdown page, to a heading of that
// page under GitHub's anchor rules. Its test runs the check over README.md,
// CHANGELOG.md and docs/ in `make test-unit`, so a renamed page or heading
// cannot leave a dead link behind.
package doclinks

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Broken is one link that does not resolve.
type Broken struct {
	Page   string // the page holding the link, relative to the root
	Line   int    // 1-based
	Target string // the link as written
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: (%s) %s", b.Page, b.Line, b.Target, b.Reason)
}

// link is a link target found on a page.
type link struct {
	line   int
	target string
}

var (
	// inlineLink matches the target of [text](target) and ![alt](target),
	// with an optional "title" after it; an escaped \] ends no link text.
	inlineLink = regexp.MustCompile(`(?:^|[^\\])\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceDefinition matches "[label]: target".
	referenceDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// codeSpan matches inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("``[^`]*``|`[^`]*`")
	// heading matches an ATX heading and captures its text.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	// htmlAnchor matches an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	// scheme matches an absolute URL's scheme (https:, mailto:, ...).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// lineFragment is GitHub's fragment for lines of a source file.
	lineFragment = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// Check reads each page (a path relative to root) and returns every relative
// link on it that does not resolve. Links to other sites are not followed.
func Check(root string, pages []string) ([]Broken, error) {
	anchors := anchorCache{root: root, byPage: map[string]map[string]bool{}}
	var broken []Broken
	for _, page := range pages {
		lines, err := readLines(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		for _, l := range linksOf(lines) {
			reason, err := resolve(root, page, l.target, &anchors)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", page, l.line, err)
			}
			if reason != "" {
				broken = append(broken, Broken{Page: page, Line: l.line, Target: l.target, Reason: reason})
			}
		}
	}
	return broken, nil
}

// resolve returns why target, written on page, leads nowhere, or "" when it
// resolves. An error is a failure to read a page, not a broken link.
func resolve(root, page, target string, anchors *anchorCache) (string, error) {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", nil
	}
	pathPart, fragment, _ := strings.Cut(target, "#")
	unescaped, err := url.PathUnescape(pathPart)
	if err != nil {
		return "the path is not valid URL escaping", nil
	}
	dest := page
	if unescaped != "" {
		dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), unescaped))
	}
	if dest == ".." || strings.HasPrefix(dest, "../") {
		return "the link leaves the repository", nil
	}
	info, err := os.Stat(filepath.Join(root, dest))
	if err != nil {
		return fmt.Sprintf("%s does not exist", dest), nil
	}
	if fragment == "" || info.IsDir() || !strings.HasSuffix(dest, ".md") {
		return fragmentOfFile(dest, fragment), nil
	}
	known, err := anchors.of(dest)
	if err != nil {
		return "", err
	}
	if !known[strings.ToLower(fragment)] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", dest, fragment), nil
	}
	return "", nil
}

// fragmentOfFile accepts the fragments GitHub gives a file that is no
// Markdown page: none, or lines (#L10, #L10-L20).
func fragmentOfFile(dest, fragment string) string {
	if fragment == "" || lineFragment.MatchString(fragment) {
		return ""
	}
	return fmt.Sprintf("#%s is no line anchor, and %s is no Markdown page", fragment, dest)
}

// linksOf returns the link targets of a page, outside fenced code blocks
// and inline code.
func linksOf(lines []string) []link {
	var links []link
	for i, text := range proseLines(lines) {
		if text == "" {
			continue
		}
		text = codeSpan.ReplaceAllString(text, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			links = append(links, link{line: i + 1, target: m[1]})
		}
		if m := referenceDefinition.FindStringSubmatch(text); m != nil {
			links = append(links, link{line: i + 1, target: m[1]})
		}
	}
	return links
}

// proseLines returns the lines with those inside fenced code blocks (and
// the fences) blanked, keeping the line numbers.
func proseLines(lines []string) []string {
	prose := make([]string, len(lines))
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		opens := strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")
		switch {
		case fence == "" && opens:
			fence = trimmed[:3]
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
		case fence == "":
			prose[i] = line
		}
	}
	return prose
}

// anchorCache holds the anchors of each Markdown page read so far.
type anchorCache struct {
	root   string
	byPage map[string]map[string]bool
}

func (c *anchorCache) of(page string) (map[string]bool, error) {
	if known, ok := c.byPage[page]; ok {
		return known, nil
	}
	lines, err := readLines(filepath.Join(c.root, page))
	if err != nil {
		return nil, err
	}
	known := anchorsOf(lines)
	c.byPage[page] = known
	return known, nil
}

// anchorsOf returns the anchors GitHub gives a page: one per heading, with
// -1, -2, ... appended to repeats, and the explicit <a name|id> anchors.
func anchorsOf(lines []string) map[string]bool {
	known := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(lines) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			known[strings.ToLower(m[1])] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := Anchor(m[1])
		if n := seen[slug]; n > 0 {
			known[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			known[slug] = true
		}
		seen[slug]++
	}
	return known
}

// markdownLink matches [text](target) inside a heading, whose anchor keeps
// only the text.
var markdownLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Anchor returns the anchor GitHub gives a heading's text: the rendered
// text in lower case, with every punctuation mark and symbol dropped except
// '-' and '_', and each space turned into '-'.
func Anchor(headingText string) string {
	text := markdownLink.ReplaceAllString(headingText, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading page: %w", err)
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		lines = append(lines, scanner.Text())
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return lines, nil
}
