// Pictures as inline SVG: one small line chart, no library. Colours are presentation attributes
// (not style), so the page's content security policy needs no inline styles.
import { h, s, num } from './dom.js';

/** An axis number that fits its margin: 56229.7 → 56.2k. */
const axis = (v) => (Math.abs(v) >= 10_000 ? `${num(v / 1000, 1)}k` : num(v));

const palette = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed', '#db2777', '#0891b2', '#65a30d'];

/**
 * A line chart: `series` = [{label, points: [{x, y}]}] (a null y breaks the line); `refLines`
 * = [{y, label}] drawn dashed; `xFormat` shows an x value. Empty series say so instead.
 */
export function lineChart({
  title,
  caption,
  series,
  yMin,
  yMax,
  refLines = [],
  xFormat = (x) => String(x),
  width = 620,
  height = 190,
  id,
}) {
  const pad = { l: 44, r: 12, t: 10, b: 24 };
  const all = series.flatMap((se) => se.points.filter((p) => p.y !== null && p.y !== undefined));
  const figure = h(
    'figure',
    { class: 'chart', ...(id ? { id } : {}) },
    h('figcaption', {}, h('strong', {}, title), caption ? ` — ${caption}` : ''),
  );
  if (!all.length) return (figure.appendChild(h('p', { class: 'muted' }, 'nothing to draw yet')), figure);
  const xs = all.map((p) => p.x);
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  if (x0 === x1) ((x0 -= 1), (x1 += 1));
  const lo = yMin ?? Math.min(...all.map((p) => p.y), ...refLines.map((r) => r.y));
  let hi = yMax ?? Math.max(...all.map((p) => p.y), ...refLines.map((r) => r.y));
  if (hi === lo) hi = lo + 1;
  const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (y) => height - pad.b - ((y - lo) / (hi - lo)) * (height - pad.t - pad.b);
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title });
  svg.append(
    s('line', { x1: pad.l, y1: Y(lo), x2: width - pad.r, y2: Y(lo), stroke: '#9ca3af' }),
    s('line', { x1: pad.l, y1: pad.t, x2: pad.l, y2: Y(lo), stroke: '#9ca3af' }),
    s('text', { x: pad.l - 4, y: Y(hi) + 4, 'text-anchor': 'end', class: 'axis' }, axis(hi)),
    s('text', { x: pad.l - 4, y: Y(lo), 'text-anchor': 'end', class: 'axis' }, axis(lo)),
    s('text', { x: pad.l, y: height - 6, class: 'axis' }, xFormat(x0)),
    s('text', { x: width - pad.r, y: height - 6, 'text-anchor': 'end', class: 'axis' }, xFormat(x1)),
  );
  if (lo < 0 && hi > 0) svg.append(s('line', { x1: pad.l, y1: Y(0), x2: width - pad.r, y2: Y(0), stroke: '#e5e7eb' }));
  for (const r of refLines) {
    svg.append(
      s('line', { x1: pad.l, y1: Y(r.y), x2: width - pad.r, y2: Y(r.y), stroke: '#6b7280', 'stroke-dasharray': '4 3' }),
      s('text', { x: width - pad.r - 2, y: Y(r.y) - 3, 'text-anchor': 'end', class: 'axis' }, r.label),
    );
  }
  series.forEach((se, i) => {
    const colour = palette[i % palette.length];
    let d = '';
    let pen = false;
    for (const p of se.points) {
      if (p.y === null || p.y === undefined) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${X(p.x).toFixed(1)} ${Y(p.y).toFixed(1)} `;
      pen = true;
    }
    svg.append(
      s('path', {
        d: d.trim(),
        fill: 'none',
        stroke: colour,
        'stroke-width': 2,
        class: 'series',
        'data-series': se.label,
      }),
    );
    if (se.points.length <= 120) {
      for (const p of se.points)
        if (p.y !== null && p.y !== undefined)
          svg.append(
            s(
              'circle',
              { cx: X(p.x), cy: Y(p.y), r: 2.5, fill: colour },
              s('title', {}, `${se.label}: ${num(p.y)} at ${xFormat(p.x)}`),
            ),
          );
    }
  });
  figure.append(
    svg,
    h(
      'div',
      { class: 'legend' },
      series.map((se, i) =>
        h(
          'span',
          { class: 'key' },
          s('svg', { width: 12, height: 12 }, s('rect', { width: 12, height: 12, fill: palette[i % palette.length] })),
          ` ${se.label}`,
        ),
      ),
    ),
  );
  return figure;
}
