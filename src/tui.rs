//! The interactive terminal UI (minimal screen; built out by the TUI work).

use crate::suite::{PhaseFilter, Suite, Workspace};
use crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::prelude::*;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, suite: &Suite, ws: &Workspace) {
    let area = f.area();
    let chunks = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .split(area);
    f.render_widget(
        Paragraph::new(format!(
            " atrex-tui · {} operators · no GPU: browse and replay only · workspace {}",
            suite.problems.len(),
            ws.dir.display()
        )),
        chunks[0],
    );
    let weights = suite.weights(PhaseFilter::All);
    let rows: Vec<Row> = suite
        .by_weight(PhaseFilter::All)
        .into_iter()
        .map(|p| {
            Row::new(vec![
                p.name.clone(),
                format!(
                    "{:.2}%",
                    weights.get(&p.name).copied().unwrap_or(0.0) * 100.0
                ),
                p.phase_label(),
                p.shapes.len().to_string(),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(30),
            Constraint::Length(8),
            Constraint::Length(15),
            Constraint::Length(6),
        ],
    )
    .header(Row::new(vec!["operator", "weight", "phase", "shapes"]))
    .block(Block::default().borders(Borders::ALL).title("operators"));
    f.render_widget(table, chunks[1]);
    f.render_widget(Paragraph::new(" q quit"), chunks[2]);
}

pub fn run(ws: &Workspace) -> Result<i32, String> {
    let suite = Suite::load(ws.suite_source()).map_err(|e| e.to_string())?;
    let mut terminal = ratatui::init();
    let res = (|| -> std::io::Result<()> {
        loop {
            terminal.draw(|f| draw(f, &suite, ws))?;
            if let Event::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Press
                    && (k.code == KeyCode::Char('q') || k.code == KeyCode::Esc)
                {
                    return Ok(());
                }
            }
        }
    })();
    ratatui::restore();
    res.map(|_| 0).map_err(|e| e.to_string())
}
