// The app's chart: figure JSON (sent as bytes) drawn by the plotly.js that the plotly package ships, served from the
// app's static folder. A rerun hands the same element new bytes and Plotly.react updates the drawn chart in place:
// st.plotly_chart's element id hashes the figure, so every slider move remounted every chart (purge, then newPlot).

const PLOTLY_SRC = "app/static/plotly.min.js"; // relative to the page; chart.py names the served copy here

function plotlyLoaded() {
  if (!window.mhaPlotly) {
    window.mhaPlotly = new Promise((resolve, reject) => {
      if (window.Plotly) {
        resolve(window.Plotly);
        return;
      }
      const script = document.createElement("script");
      script.src = new URL(PLOTLY_SRC, document.baseURI).href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => {
        window.mhaPlotly = null; // the next draw tries again
        reject(new Error("plotly.js did not load from " + script.src));
      };
      document.head.appendChild(script);
    });
  }
  return window.mhaPlotly;
}

// Streamlit's plotly theme (what st.plotly_chart's theme="streamlit" applied), with the page's own colours and type
// size: it goes under the figure's settings (a template), so what a figure leaves unset (backgrounds, text and grid
// colours) follows the light or dark page. Faded text is #555a68 on a light page (6.9:1; Streamlit's #808495 is
// 3.7:1); grid lines and legend text are Streamlit's. Sizes in px at a 16-px root, scaled with the root's type (22 px
// in presenter mode), as Streamlit scales them.
const PALETTE = {
  light: { faded: "#555a68", grid: "#e6eaf1", legend: "#262730" },
  dark: { faded: "#e6eaf1", grid: "#31333f", legend: "#fafafa" },
};

function pageTemplate(element) {
  const style = getComputedStyle(element);
  const css = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  const text = css("--st-text-color", "#111111");
  const background = css("--st-background-color", "#ffffff");
  const border = css("--st-border-color", "#6b7280");
  const family = css("--st-font", '"Source Sans", sans-serif');
  const { faded, grid, legend } = PALETTE[isDark(background) ? "dark" : "light"];
  const px = (n) => (n * parseFloat(getComputedStyle(document.documentElement).fontSize)) / 16;
  const axis = (standoff) => ({
    gridcolor: grid,
    zerolinecolor: grid,
    tickcolor: grid,
    minor: { gridcolor: grid },
    tickfont: { color: faded, size: px(12) },
    title: { font: { color: faded, size: px(14) }, standoff: px(standoff) },
    automargin: true,
  });
  return {
    data: { scatter: [{ type: "scatter" }] },
    layout: {
      font: { color: faded, family, size: px(12), weight: 400 },
      title: { font: { family, size: px(16), color: text }, pad: { l: px(4) }, xanchor: "left", x: 0 },
      legend: {
        title: { font: { size: px(12), color: faded }, side: "top" },
        valign: "top",
        bordercolor: "transparent",
        borderwidth: 0,
        font: { size: px(12), color: legend },
      },
      paper_bgcolor: background,
      plot_bgcolor: background,
      xaxis: { ...axis(20), showgrid: false, zeroline: false },
      yaxis: { ...axis(24), ticklabelposition: "outside" },
      margin: { pad: px(8), r: 0, l: 0 },
      hoverlabel: { bgcolor: background, bordercolor: border, font: { color: faded, family, size: px(12) } },
      coloraxis: {
        colorbar: {
          thickness: 16,
          xpad: px(24),
          ticklabelposition: "outside",
          outlinecolor: "transparent",
          outlinewidth: 8,
          len: 0.75,
          y: 0.5745,
          title: { font: { color: faded, size: px(14) } },
          tickfont: { color: faded, size: px(12) },
        },
      },
    },
  };
}

function isDark(color) {
  const probe = document.createElement("canvas").getContext("2d");
  probe.fillStyle = color; // any CSS colour, read back as #rrggbb
  const hex = probe.fillStyle.slice(1);
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return 0.299 * r + 0.587 * g + 0.114 * b < 128;
}

// While plotly draws (a new figure, or a resize), the chart carries data-mha-drawing: the browser tests wait for no
// chart to carry it rather than for a fixed time. A count, as a resize may start while a figure is being drawn.
function drawing(plot, promise) {
  plot.mhaDrawing = (plot.mhaDrawing || 0) + 1;
  plot.setAttribute("data-mha-drawing", "");
  const done = () => {
    plot.mhaDrawing -= 1;
    if (!plot.mhaDrawing) plot.removeAttribute("data-mha-drawing");
  };
  return promise.then(
    (value) => {
      done();
      return value;
    },
    (error) => {
      done();
      throw error;
    },
  );
}

// The chart follows its place's size: the page's width changes without a window resize (the sidebar folded or
// unfolded), and plotly's own `responsive` follows only the window. The place's width, and on a stage its height
// too (elsewhere the height is the figure's own, and plotly drawing it must not count as a change).
function followPlace(plot) {
  if (plot.mhaPlace) return;
  let drawn = "";
  plot.mhaPlace = new ResizeObserver(([entry]) => {
    const { width, height } = entry.contentRect;
    const size = plot.mhaStretch ? `${Math.round(width)}x${Math.round(height)}` : `${Math.round(width)}`;
    // A chart leaving the page (a page switch, a rerun that drops it) or hidden (a closed tab or expander) is not
    // resized: plotly refuses it ("Resize must be passed a displayed plot div element"), and the size it would
    // have is not a size to remember. Once shown again its place's size changes and it is resized then.
    if (!plot.isConnected || !width || getComputedStyle(plot).display === "none") return;
    if (drawn && size !== drawn && plot._fullLayout && window.Plotly) {
      drawing(plot, window.Plotly.Plots.resize(plot)).catch(() => {}); // a race with hiding: nothing to draw
    }
    drawn = size;
  });
  plot.mhaPlace.observe(plot);
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let plot = parentElement.querySelector(":scope > div.mha-chart");
  if (!plot) {
    plot = document.createElement("div");
    plot.className = "mha-chart";
    // A figure that the keyboard reaches, a figure to a screen reader, named by the view's description of it (what
    // it shows, its shape, where it is largest: figures.describe; its numbers are in "Show as table" under it). Streamlit's tab panel (react-aria) looks for a
    // tabbable element in the panel on every change under it: with none there, each of plotly's DOM updates walked
    // every node of every chart in the panel (0.1 s of a move at 8 heads × 512 tokens; docs/decisions.md).
    plot.tabIndex = 0;
    plot.setAttribute("role", "figure"); // not "img": its children (plotly's focusable parts) stay reachable
    parentElement.appendChild(plot);
  }
  followPlace(plot);
  const { figure, config, stretch, label, clickable } = JSON.parse(new TextDecoder().decode(data));
  plot.mhaClicked = clickable ? (index) => setTriggerValue("clicked", index) : null; // this run's sender
  plot.setAttribute("aria-label", label || "chart");
  // The figure's width and, on a stage, its height are its place's (Streamlit's width="stretch"): a figure that
  // sets its own width is drawn in a place of that width (boundary.plot).
  const layout = { ...figure.layout, template: pageTemplate(plot), autosize: true };
  delete layout.width;
  if (stretch) delete layout.height;
  plot.style.height = stretch ? "100%" : "";
  plot.mhaStretch = stretch;
  if (layout.title?.text) layout.title = { ...layout.title, text: `<b>${layout.title.text}</b>` }; // as Streamlit's
  drawing(
    plot,
    plotlyLoaded().then((Plotly) => Plotly.react(plot, figure.data, layout, { ...config, responsive: true })),
  )
    .then(() => {
      parentElement.querySelector(":scope > .mha-chart-error")?.remove();
      if (!plot.mhaListens) {
        // A click on a point whose customdata is an integer (a token's index) goes back to the page, once listened.
        plot.mhaListens = true;
        plot.on("plotly_click", (event) => {
          const point = event.points.find((p) => Number.isInteger(p.customdata));
          if (point && plot.mhaClicked) plot.mhaClicked(point.customdata);
        });
      }
    })
    .catch((error) => {
      let note = parentElement.querySelector(":scope > .mha-chart-error");
      if (!note) {
        note = document.createElement("p");
        note.className = "mha-chart-error";
        parentElement.appendChild(note);
      }
      note.textContent = "This chart could not be drawn: " + error.message;
    });
}
