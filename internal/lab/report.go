package lab

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

//go:embed report.html.tmpl
var labReportHTML string

var labReportTemplate = template.Must(template.New("report").Parse(labReportHTML))

// labCellText is a cell as the terminal table shows it.
func labCellText(r labResult) string {
	if r.failure != "" {
		return "not measured"
	}
	return fmt.Sprintf("dup %d  lost %d  rec %d", r.duplicates, r.lost, r.recovered)
}

// labTable is the matrix as a plain-text table, designs down, scenarios
// across.
func labTable(results []labResult, designs, scenarios []string) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprint(w, "design")
	for _, s := range scenarios {
		fmt.Fprintf(w, "\t%s", labScenarios[scenarioIndex(s)].title)
	}
	fmt.Fprintln(w)
	for _, d := range designs {
		fmt.Fprint(w, labDesigns[designIndex(d)].title)
		for _, s := range scenarios {
			text := "not run"
			if r, ok := findResult(results, d, s); ok {
				text = labCellText(r)
			}
			fmt.Fprintf(w, "\t%s", text)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	b.WriteString("\ndup: side effects beyond the first; lost: acked or claimed, never effected; rec: interrupted, yet effected, acked and completed\n")
	if slices.Contains(designs, designHookgate) {
		b.WriteString("hookgate over design 4: the ack tied to a durable job (not to the provider's retries), backoff per route, the console (docs/lab.md)\n")
	}
	return b.String()
}

func findResult(results []labResult, design, scenario string) (labResult, bool) {
	for _, r := range results {
		if r.design == design && r.scenario == scenario {
			return r, true
		}
	}
	return labResult{}, false
}

// labReport is what the HTML report template is given.
type labReport struct {
	Generated, Took string
	Copies          int
	Scenarios       []string
	Rows            []labReportRow
	Charts          []labChart
}

type labReportRow struct {
	Design string
	Cells  []labReportCell
}

type labReportCell struct {
	Run                         bool
	Duplicates, Lost, Recovered int
	Bad                         bool // a duplicate or a lost event
	Why                         string
}

// labChart is one scenario's bar chart: duplicates and lost events per
// design, drawn as inline SVG.
type labChart struct {
	Title         string
	Width, Height int
	Bars          []labBar
	Labels        []labLabel
	AxisY, MaxY   int
	Max           int
}

type labBar struct {
	X, Y, W, H int
	Class      string
	Value      int
	ValueY     int
	Title      string
}

type labLabel struct {
	X, Y int
	Text string
}

// Chart geometry, in SVG user units.
const (
	chartLeft   = 40
	chartTop    = 20
	chartPlot   = 120 // height of the bars' area
	chartGroup  = 76  // width given to each design
	chartBar    = 26
	chartBottom = 40
)

// newLabChart draws the scenario's duplicates and lost events per design.
func newLabChart(results []labResult, designs []string, scenario string) labChart {
	c := labChart{Title: labScenarios[scenarioIndex(scenario)].title, Max: 1}
	for _, d := range designs {
		if r, ok := findResult(results, d, scenario); ok {
			c.Max = max(c.Max, r.duplicates, r.lost)
		}
	}
	c.Width, c.Height = chartLeft+chartGroup*len(designs)+10, chartTop+chartPlot+chartBottom
	c.AxisY, c.MaxY = chartTop+chartPlot, chartTop
	for i, d := range designs {
		x := chartLeft + i*chartGroup + 8
		r, _ := findResult(results, d, scenario)
		for j, bar := range []struct {
			class, name string
			v           int
		}{{"dup", "duplicate effects", r.duplicates}, {"lost", "lost events", r.lost}} {
			h := bar.v * chartPlot / c.Max
			c.Bars = append(c.Bars, labBar{
				X: x + j*(chartBar+4), Y: chartTop + chartPlot - h, W: chartBar, H: h, Class: bar.class,
				Value: bar.v, ValueY: chartTop + chartPlot - h - 4,
				Title: fmt.Sprintf("%s: %d %s", labDesigns[designIndex(d)].title, bar.v, bar.name),
			})
		}
		c.Labels = append(c.Labels, labLabel{X: x + chartBar + 2, Y: chartTop + chartPlot + 16, Text: strings.SplitN(labDesigns[designIndex(d)].title, " ", 2)[0] + " " + d})
	}
	return c
}

// writeLabReport writes the report: the table with a sentence per cell, and
// a chart per scenario, in one file with no external assets.
func writeLabReport(path string, results []labResult, designs, scenarios []string, copies int, took time.Duration) error {
	rep := labReport{Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Took: took.String(), Copies: copies}
	for _, s := range scenarios {
		rep.Scenarios = append(rep.Scenarios, labScenarios[scenarioIndex(s)].title)
		rep.Charts = append(rep.Charts, newLabChart(results, designs, s))
	}
	for _, d := range designs {
		row := labReportRow{Design: labDesigns[designIndex(d)].title}
		for _, s := range scenarios {
			r, ok := findResult(results, d, s)
			cell := labReportCell{Run: ok && r.failure == "", Why: "Not run."}
			if ok {
				cell.Duplicates, cell.Lost, cell.Recovered = r.duplicates, r.lost, r.recovered
				cell.Bad = r.duplicates > 0 || r.lost > 0
				cell.Why = labWhy(r)
			}
			row.Cells = append(row.Cells, cell)
		}
		rep.Rows = append(rep.Rows, row)
	}
	var b bytes.Buffer
	if err := labReportTemplate.Execute(&b, rep); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
