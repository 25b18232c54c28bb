#include "scores/leaderboard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <pkb/check.h>

#include "scores/problem_index.h"
#include "scores/scoring.h"

namespace pkb {

namespace {

// The fast_p the table shows: the paper's headline "fast1".
constexpr double kTableP = 1.0;
const char* const kArrow = "\u2192";

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return buf;
}

double number(const Json& j, const std::string& key) {
  PKB_CHECK(j.contains(key) && j[key].is_number(), "scores file lacks '", key, "'");
  return j[key].get<double>();
}

std::string range_cell(const Json& counts, const std::string& lo_key, const std::string& hi_key) {
  std::string lo = format_count(number(counts, lo_key));
  if (lo_key == hi_key) return lo;
  return lo + kArrow + format_count(number(counts, hi_key));
}

Table category_table(const Json& scores) {
  int k_lo = scores["k"].front().get<int>(), k_hi = k_lo;
  for (const auto& k : scores["k"]) {
    k_lo = k.get<int>() < k_lo ? k.get<int>() : k_lo;
    k_hi = k.get<int>() > k_hi ? k.get<int>() : k_hi;
  }
  const std::string k_label = k_lo == k_hi ? std::to_string(k_lo) : std::to_string(k_lo) + kArrow + std::to_string(k_hi);
  Table t;
  t.title = "Per category";
  t.header = {"Category", "Problems"};
  for (const auto& [name, model] : scores["models"].items()) {
    t.header.push_back(name + " pass@" + k_label);
    t.header.push_back(name + " fast" + format_p(kTableP) + "@" + k_label);
  }
  auto row_for = [&](const std::string& label, const std::string& problems, auto&& group_of) {
    std::vector<std::string> row = {label, problems};
    for (const auto& [name, model] : scores["models"].items()) {
      const Json& counts = group_of(model)["counts"];
      row.push_back(range_cell(counts, pass_key(k_lo), pass_key(k_hi)));
      row.push_back(range_cell(counts, fast_key(kTableP, k_lo), fast_key(kTableP, k_hi)));
    }
    return row;
  };
  for (const std::string& cat : category_order()) {
    int problems = 0;
    for (const auto& e : problem_index()) problems += cat == e.category;
    t.rows.push_back(row_for(cat, std::to_string(problems), [&](const Json& m) -> const Json& {
      PKB_CHECK(m["categories"].contains(cat), "scores file lacks category '", cat, "'");
      return m["categories"][cat];
    }));
  }
  t.rows.push_back(row_for("Total", std::to_string(kProblemCount), [](const Json& m) -> const Json& {
    return m["overall"];
  }));
  return t;
}

Table overall_table(const Json& scores) {
  Table t;
  t.title = "Overall";
  t.header = {"Model"};
  for (const auto& k : scores["k"]) t.header.push_back(pass_key(k.get<int>()));
  for (const auto& k : scores["k"]) {
    for (const auto& p : scores["p"]) t.header.push_back(fast_key(p.get<double>(), k.get<int>()));
  }
  t.header.push_back("geomean speedup");
  std::vector<std::string> outcome_names;  // every model's, in first-seen order (agent_error only where it happened)
  for (const auto& [model_name, model] : scores["models"].items()) {
    for (const auto& [name, count] : model.at("overall").at("outcomes").items()) {
      if (std::find(outcome_names.begin(), outcome_names.end(), name) == outcome_names.end())
        outcome_names.push_back(name);
    }
  }
  for (const auto& o : outcome_names) t.header.push_back(o);
  t.header.push_back("harness_error");
  for (const auto& [name, model] : scores["models"].items()) {
    const Json& o = model["overall"];
    std::vector<std::string> row = {name};
    for (const auto& k : scores["k"]) row.push_back(fixed(number(o, pass_key(k.get<int>())), 3));
    for (const auto& k : scores["k"]) {
      for (const auto& p : scores["p"]) row.push_back(fixed(number(o, fast_key(p.get<double>(), k.get<int>())), 3));
    }
    row.push_back(o["geomean_speedup"].is_number() ? fixed(o["geomean_speedup"].get<double>(), 2) + "x" : "-");
    for (const auto& name_o : outcome_names) row.push_back(std::to_string(o["outcomes"].value(name_o, 0)));
    row.push_back(std::to_string(o.value("harness_errors", 0)));
    t.rows.push_back(row);
  }
  return t;
}

// pkb agent runs (NOTE [step budgets]): one row per step budget, per model
// pass@ and fast1@ counts as in the category table; "-" where a model has no
// such budget (or is no agent run). No rows: no model is an agent run.
Table agentic_table(const Json& scores) {
  Table t;
  t.title = "By step budget (pkb agent)";
  int k_lo = scores["k"].front().get<int>(), k_hi = k_lo, budget = 0;
  for (const auto& k : scores["k"]) {
    k_lo = std::min(k_lo, k.get<int>());
    k_hi = std::max(k_hi, k.get<int>());
  }
  for (const auto& [name, model] : scores["models"].items())
    if (model.contains("agentic")) budget = std::max(budget, model["agentic"].value("max_steps", 0));
  if (budget == 0) return t;
  const std::string k_label = k_lo == k_hi ? std::to_string(k_lo) : std::to_string(k_lo) + kArrow + std::to_string(k_hi);
  t.header = {"Steps"};
  for (const auto& [name, model] : scores["models"].items()) {
    t.header.push_back(name + " pass@" + k_label);
    t.header.push_back(name + " fast" + format_p(kTableP) + "@" + k_label);
  }
  for (int s = 1; s <= budget; ++s) {
    std::vector<std::string> row = {std::to_string(s)};
    for (const auto& [name, model] : scores["models"].items()) {
      const Json* at = nullptr;
      if (model.contains("agentic"))
        for (const auto& b : model["agentic"]["by_steps"])
          if (b.value("steps", 0) == s) at = &b;
      row.push_back(at ? range_cell((*at)["counts"], pass_key(k_lo), pass_key(k_hi)) : "-");
      row.push_back(at ? range_cell((*at)["counts"], fast_key(kTableP, k_lo), fast_key(kTableP, k_hi)) : "-");
    }
    t.rows.push_back(row);
  }
  return t;
}

std::string escape_md(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string escape_csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string escape_tex(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (s.compare(i, 3, kArrow) == 0) {
      out += "$\\to$";
      i += 2;
    } else if (c == '\\') {
      out += "\\textbackslash{}";
    } else if (c == '~') {
      out += "\\textasciitilde{}";
    } else if (c == '^') {
      out += "\\textasciicircum{}";
    } else if (std::string("&%$#_{}").find(c) != std::string::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

void render_md(std::ostream& os, const Table& t) {
  os << "## " << t.title << "\n\n";
  auto line = [&](const std::vector<std::string>& cells) {
    os << "|";
    for (const auto& c : cells) os << " " << escape_md(c) << " |";
    os << "\n";
  };
  line(t.header);
  os << "|";
  for (size_t i = 0; i < t.header.size(); ++i) os << (i == 0 ? "---|" : "---:|");
  os << "\n";
  for (const auto& r : t.rows) line(r);
  os << "\n";
}

void render_csv(std::ostream& os, const Table& t) {
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) os << (i ? "," : "") << escape_csv(cells[i]);
    os << "\n";
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
}

void render_tex(std::ostream& os, const Table& t) {
  os << "% " << t.title << "\n\\begin{tabular}{l" << std::string(t.header.size() - 1, 'r') << "}\n\\hline\n";
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) os << (i ? " & " : "") << escape_tex(cells[i]);
    os << " \\\\\n";
  };
  line(t.header);
  os << "\\hline\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    if (t.rows[i][0] == "Total") os << "\\hline\n";
    line(t.rows[i]);
  }
  os << "\\hline\n\\end{tabular}\n\n";
}

void render_html_table(std::ostream& os, const Table& t) {
  os << "<h2>" << escape_html(t.title) << "</h2>\n<table>\n<thead><tr>";
  for (const auto& c : t.header) os << "<th>" << escape_html(c) << "</th>";
  os << "</tr></thead>\n<tbody>\n";
  for (const auto& r : t.rows) {
    os << (r[0] == "Total" ? "<tr class=\"total\">" : "<tr>");
    for (const auto& c : r) os << "<td>" << escape_html(c) << "</td>";
    os << "</tr>\n";
  }
  os << "</tbody>\n</table>\n";
}

void check_scores_file(const Json& s) {
  PKB_CHECK(s.is_object() && s.value("kind", std::string()) == "scores", "not a pkb scores file (kind != scores)");
  PKB_CHECK(s.value("schema_version", 0) == kScoresSchemaVersion, "scores file has schema_version ",
            s.value("schema_version", 0), ", this pkb reads ", kScoresSchemaVersion);
  PKB_CHECK(s.contains("k") && s["k"].is_array() && !s["k"].empty(), "scores file lacks its k list");
  PKB_CHECK(s.contains("p") && s["p"].is_array(), "scores file lacks its p list");
  PKB_CHECK(s.contains("models") && s["models"].is_object(), "scores file lacks its models");
}

}  // namespace

std::string format_count(double x) {
  const double rounded = std::round(x);
  // The estimator's float products land within rounding of an integer.
  if (std::fabs(x - rounded) < 1e-6) return std::to_string(static_cast<long long>(rounded));
  return fixed(x, 1);
}

Json combine_scores(const std::vector<Json>& scores, bool mixed_speed) {
  PKB_CHECK(!scores.empty(), "no scores files");
  Json out = Json::object();
  out["schema_version"] = kScoresSchemaVersion;
  out["kind"] = "scores";
  out["models"] = Json::object();
  for (const Json& s : scores) {
    check_scores_file(s);
    if (!out.contains("k")) {
      out["k"] = s["k"];
      out["p"] = s["p"];
    }
    PKB_CHECK(s["k"] == out["k"] && s["p"] == out["p"], "scores files were made with different --k or --p");
    // Speed columns from CPU runs or shared GPUs are not comparable with NVLink ones.
    PKB_CHECK(mixed_speed || !s.value("mixed_speed", false),
              "a scores file was made with pkb score --mixed-speed (speedups timed on CPU or with ranks sharing "
              "a GPU); pass --mixed-speed to the leaderboard too to show them");
    for (const auto& [name, model] : s["models"].items()) {
      PKB_CHECK(!out["models"].contains(name), "model '", name, "' appears in more than one scores file");
      out["models"][name] = model;
    }
  }
  return out;
}

std::string render_leaderboard(const Json& scores, const std::string& format) {
  check_scores_file(scores);
  bool has_table_p = false;
  for (const auto& p : scores["p"]) has_table_p |= p.get<double>() == kTableP;
  PKB_CHECK(has_table_p, "the leaderboard shows fast", format_p(kTableP), ": score with it in --p");
  std::vector<Table> tables = {category_table(scores), overall_table(scores)};
  Table agentic = agentic_table(scores);
  if (!agentic.rows.empty()) tables.push_back(agentic);
  std::ostringstream os;
  if (format == "md") {
    os << "# pkb leaderboard\n\n";
    for (const auto& t : tables) render_md(os, t);
  } else if (format == "csv") {
    for (size_t i = 0; i < tables.size(); ++i) {
      if (i) os << "\n";  // a blank line between the two tables
      render_csv(os, tables[i]);
    }
  } else if (format == "tex") {
    for (const auto& t : tables) render_tex(os, t);
  } else if (format == "html") {
    os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>pkb leaderboard</title>\n"
          "<style>\n"
          "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
          "table{border-collapse:collapse;margin-bottom:2em}\n"
          "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}\n"
          "th:first-child,td:first-child{text-align:left}\n"
          "thead th{background:#f0f0f0}\n"
          "tr.total td{font-weight:bold;border-top:2px solid #888}\n"
          "</style>\n</head>\n<body>\n<h1>pkb leaderboard</h1>\n";
    for (const auto& t : tables) render_html_table(os, t);
    os << "</body>\n</html>\n";
  } else {
    PKB_CHECK(false, "unknown leaderboard format '", format, "' (md, csv, tex or html)");
  }
  return os.str();
}

}  // namespace pkb
