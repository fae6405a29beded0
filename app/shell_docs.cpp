#include "shell_docs.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gridwarp/interpolation.hpp"

namespace gridwarp::cli {

namespace {

std::vector<const CLI::App*> commands_of(const CLI::App& app) {
    std::vector<const CLI::App*> commands;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) commands.push_back(sub);
    return commands;
}

std::vector<const CLI::Option*> named_options(const CLI::App& command) {
    std::vector<const CLI::Option*> options;
    for (const CLI::Option* option : command.get_options()) {
        if (option->nonpositional()) options.push_back(option);
    }
    return options;
}

// Every spelling of an option: -i, --input.
std::vector<std::string> spellings(const CLI::Option& option) {
    std::vector<std::string> names;
    for (const std::string& name : option.get_snames()) names.push_back("-" + name);
    for (const std::string& name : option.get_lnames()) names.push_back("--" + name);
    return names;
}

bool takes_value(const CLI::Option& option) { return option.get_expected_max() > 0 && option.get_type_size_max() > 0; }

// The values an option takes from a fixed set: {a,b,c} in its type name, or the modes and paddings
// (whose checks suggest the nearest name instead of listing a set).
std::vector<std::string> choices(const CLI::Option& option) {
    const std::string type = option.get_type_name();
    std::vector<std::string> values;
    if (type.find("MODE") != std::string::npos) {
        for (const InterpolationKind& kind : interpolation_kinds()) values.emplace_back(kind.name);
        values.emplace_back("GenericLabel");
        return values;
    }
    if (type.find("PADDING") != std::string::npos) return {"zeros", "border", "reflection", "itk"};
    const std::size_t open = type.find('{'), close = type.find('}');
    if (open == std::string::npos || close == std::string::npos || close < open) return values;
    std::istringstream items(type.substr(open + 1, close - open - 1));
    for (std::string item; std::getline(items, item, ',');) values.push_back(item);
    return values;
}

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
    return text;
}

// roff text: backslashes written out, a line never starting with a control character.
std::string roff(const std::string& text) {
    std::string escaped;
    for (const char c : text) {
        if (c == '\\') {
            escaped += "\\e";
        } else if (c == '-') {
            escaped += "\\-";
        } else {
            escaped += c;
        }
    }
    std::string lines;
    std::istringstream in(escaped);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && (line.front() == '.' || line.front() == '\'')) line = "\\&" + line;
        lines += line + "\n";
    }
    return lines;
}

// Text inside single quotes for sh, and for zsh's _arguments specs (no brackets or colons there).
std::string single_quoted(const std::string& text) {
    std::string quoted;
    for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted;
}

std::string zsh_description(const std::string& text) {
    std::string cleaned;
    for (const char c : text.substr(0, text.find_first_of(".;:(") == std::string::npos ? text.size() : text.find_first_of(".;:("))) {
        cleaned += (c == '[' || c == ']' || c == '\n') ? ' ' : c;
    }
    while (!cleaned.empty() && cleaned.back() == ' ') cleaned.pop_back();
    return single_quoted(cleaned);
}

}  // namespace

std::string man_page(const CLI::App& app) {
    std::string page =
        ".TH GRIDWARP 1 \"\" \"gridwarp\" \"User Commands\"\n"
        ".SH NAME\n"
        "gridwarp \\- exact grid sampling, warping and resampling of images, volumes and tensors\n"
        ".SH SYNOPSIS\n"
        ".B gridwarp\n"
        ".I COMMAND\n"
        "[\\fIOPTIONS\\fR]\n"
        ".br\n"
        ".B gridwarp help\n"
        "[\\fBmodes\\fR|\\fBpadding\\fR|\\fICOMMAND\\fR]\n"
        ".SH DESCRIPTION\n" +
        roff(app.get_description()) +
        ".PP\n"
        "Each command reads its input, builds sampling positions from a matrix, a flow field or a chain of\n"
        "transforms, samples and writes the output with its header. Documentation: docs/cli.md and\n"
        "docs/semantics.md in the source tree.\n"
        ".SH COMMANDS\n";
    for (const CLI::App* command : commands_of(app)) {
        page += ".SS \"gridwarp " + command->get_name() + "\"\n" + roff(command->get_description());
        std::vector<std::string> groups;
        for (const CLI::Option* option : named_options(*command)) {
            if (std::find(groups.begin(), groups.end(), option->get_group()) == groups.end()) groups.push_back(option->get_group());
        }
        for (const std::string& group : groups) {
            page += ".PP\n\\fI" + roff(group).substr(0, roff(group).size() - 1) + "\\fR\n";
            for (const CLI::Option* option : named_options(*command)) {
                if (option->get_group() != group) continue;
                std::string names;
                for (const std::string& name : spellings(*option)) names += (names.empty() ? "" : ", ") + std::string("\\fB") + roff(name).substr(0, roff(name).size() - 1) + "\\fR";
                if (takes_value(*option)) names += " \\fI" + roff(option->get_type_name()).substr(0, roff(option->get_type_name()).size() - 1) + "\\fR";
                page += ".TP\n" + names + "\n" + roff(option->get_description());
            }
        }
        const std::string footer = command->get_footer();
        if (!footer.empty()) page += ".PP\n.nf\n" + roff(footer) + ".fi\n";
    }
    page +=
        ".SH EXIT STATUS\n"
        ".TP\n0\nsuccess\n"
        ".TP\n1\nthe work failed: an input could not be read, a transform applied or an output written; one line names the file and the problem\n"
        ".TP\n2\na usage mistake: an unknown option or value, with the nearest valid one\n"
        ".TP\n3\nbatch: some jobs failed (the report says which)\n"
        ".TP\n130, 143\nbatch: interrupted by SIGINT or SIGTERM; \\-\\-resume continues\n"
        ".SH SEE ALSO\n"
        "antsApplyTransforms(1), mrtransform(1), vips(1)\n";
    return page;
}

std::string bash_completion(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* command : commands_of(app)) names.push_back(command->get_name());
    std::string script =
        "# bash completion for gridwarp, written by 'gridwarp help --bash-completion'\n"
        "_gridwarp() {\n"
        "    local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]}\n"
        "    if [[ $COMP_CWORD -eq 1 ]]; then\n"
        "        COMPREPLY=($(compgen -W '" + joined(names, " ") + " --help --version' -- \"$current\"))\n"
        "        return\n"
        "    fi\n"
        "    local options values\n"
        "    case ${COMP_WORDS[1]} in\n";
    for (const CLI::App* command : commands_of(app)) {
        std::vector<std::string> spelled;
        std::string value_cases;
        for (const CLI::Option* option : named_options(*command)) {
            const std::vector<std::string> option_names = spellings(*option);
            spelled.insert(spelled.end(), option_names.begin(), option_names.end());
            const std::vector<std::string> fixed = choices(*option);
            if (!fixed.empty()) value_cases += "                " + joined(option_names, "|") + ") values='" + joined(fixed, " ") + "' ;;\n";
        }
        if (command->get_name() == "help") value_cases += "                help) values='modes padding " + joined(names, " ") + "' ;;\n";
        script += "        " + command->get_name() + ")\n"
                  "            options='" + joined(spelled, " ") + "'\n"
                  "            case $previous in\n" + value_cases +
                  "            esac ;;\n";
    }
    script +=
        "        *) return ;;\n"
        "    esac\n"
        "    if [[ $current == -* ]]; then\n"
        "        COMPREPLY=($(compgen -W \"$options\" -- \"$current\"))\n"
        "    elif [[ -n $values ]]; then\n"
        "        COMPREPLY=($(compgen -W \"$values\" -- \"$current\"))\n"
        "    else\n"
        "        COMPREPLY=($(compgen -f -- \"$current\"))\n"
        "    fi\n"
        "}\n"
        "complete -o filenames -o bashdefault -F _gridwarp gridwarp\n";
    return script;
}

std::string zsh_completion(const CLI::App& app) {
    std::string script =
        "#compdef gridwarp\n"
        "# zsh completion for gridwarp, written by 'gridwarp help --zsh-completion'\n"
        "_gridwarp() {\n"
        "    local -a commands\n"
        "    commands=(\n";
    for (const CLI::App* command : commands_of(app)) {
        script += "        '" + command->get_name() + ":" + zsh_description(command->get_description()) + "'\n";
    }
    script +=
        "    )\n"
        "    if (( CURRENT == 2 )); then\n"
        "        _describe 'command' commands\n"
        "        return\n"
        "    fi\n"
        "    case $words[2] in\n";
    for (const CLI::App* command : commands_of(app)) {
        script += "        " + command->get_name() + ")\n            _arguments -s \\\n";
        for (const CLI::Option* option : named_options(*command)) {
            const std::vector<std::string> option_names = spellings(*option);
            const std::string repeat = option->get_expected_max() > 1 ? "*" : "";
            // Alternative spellings exclude each other, except where the option repeats.
            std::string spec = option_names.size() == 1 ? "'" + repeat + "'" + option_names.front()
                               : repeat.empty()         ? "'(" + joined(option_names, " ") + ")'{" + joined(option_names, ",") + "}"
                                                        : "'*'{" + joined(option_names, ",") + "}";
            spec += "'[" + zsh_description(option->get_description()) + "]";
            if (takes_value(*option)) {
                const std::vector<std::string> fixed = choices(*option);
                const bool path = option->get_type_name().rfind("TEXT", 0) == 0;
                spec += !fixed.empty() ? ":value:(" + joined(fixed, " ") + ")" : path ? ":file:_files" : ":value: ";
            }
            script += "                " + spec + "' \\\n";
        }
        script += command->get_name() == "help" ? "                '1:topic:(modes padding)'\n" : "                '*:file:_files'\n";
        script += "            ;;\n";
    }
    script +=
        "    esac\n"
        "}\n"
        "_gridwarp \"$@\"\n";
    return script;
}

}  // namespace gridwarp::cli
