// gridwarp help [TOPIC|COMMAND]: the interpolation modes and padding rules in full (the options'
// own help lists them briefly), or a command's help.
#include <iostream>
#include <string>

#include "cli_common.hpp"
#include "messages.hpp"
#include "shell_docs.hpp"
#include "suggestions.hpp"
#include "gridwarp/interpolation.hpp"

namespace gridwarp::cli {

namespace {

struct HelpCommand {
    std::string topic;
    bool man = false;
    bool bash = false;
    bool zsh = false;
};

// One line per interpolation kind, from the kinds' table, then GenericLabel.
std::string modes_text() {
    std::string text =
        "Interpolation modes (--mode, resample's -n): names in any case; [..] holds parameters.\n\n";
    for (const InterpolationKind& kind : interpolation_kinds()) {
        std::string name(kind.name);
        if (kind.ordered) name += "[0-5]";
        if (kind.gaussian) name += "[sigma,alpha]";
        text += "  " + name;
        text += std::string(name.size() < 28 ? 28 - name.size() : 1, ' ');
        std::string notes;
        if (!kind.aliases.empty()) notes += "aliases: " + std::string(kind.aliases) + ". ";
        notes += kind.summary;
        if (!notes.empty() && notes.back() == ' ') notes.pop_back();
        text += notes + "\n";
    }
    text +=
        "  GenericLabel[kind]          for label maps: each output takes the label whose taps weigh the most under kind\n"
        "                              (Linear by default; Cubic, LanczosWindowedSinc, ...), as antsApplyTransforms does.\n\n"
        "resize, affine, flow and resample low-pass before shrinking only as --antialias says; nearest and the\n"
        "label modes never filter. Weights, supports and boundaries: docs/semantics.md.\n";
    return text;
}

std::string padding_text() {
    return "Padding (--padding): what taps outside the input read.\n\n"
           "  zeros         the fill value (--fill, default 0); a point whose taps all miss takes it whole\n"
           "  border        the nearest edge pixel\n"
           "  reflection    the input mirrored about its outer edges (about the corner centres with --align-corners)\n"
           "  itk           resample only: ITK's rule, as antsApplyTransforms reads it (points outside the image\n"
           "                take the fill; the sincs read 0 past the edge)\n\n"
           "Defaults: zeros; resize uses border.\n";
}

void run_help(CLI::App& app, const HelpCommand& command) {
    if (command.man + command.bash + command.zsh + !command.topic.empty() > 1) {
        throw ExitStatus(2, "help: give one of a topic, --man, --bash-completion or --zsh-completion");
    }
    if (command.man || command.bash || command.zsh) {
        std::cout << (command.man ? man_page(app) : command.bash ? bash_completion(app) : zsh_completion(app));
        return;
    }
    if (command.topic.empty()) {
        std::cout << app.help();
        return;
    }
    if (command.topic == "modes" || command.topic == "mode") {
        std::cout << modes_text();
        return;
    }
    if (command.topic == "padding") {
        std::cout << padding_text();
        return;
    }
    std::vector<std::string> topics{"modes", "padding"};
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (sub->get_name() == command.topic) {
            std::cout << sub->help();
            return;
        }
        if (sub->get_name() != "help") topics.push_back(sub->get_name());
    }
    std::string list;
    for (const std::string& topic : topics) list += (list.empty() ? "" : ", ") + topic;
    throw ExitStatus(2, "help: unknown topic '" + command.topic + "'" + did_you_mean(command.topic, topics) + ": expected " + list);
}

}  // namespace

CommandBinding register_help_command(CLI::App& app) {
    auto command = std::make_shared<HelpCommand>();
    CLI::App* sub = app.add_subcommand("help", "The interpolation modes or padding rules in full, or a command's help");
    sub->add_option("topic", command->topic, "modes, padding, or a command's name");
    sub->add_flag("--man", command->man, "Print the gridwarp(1) man page (roff), written from the commands' options");
    sub->add_flag("--bash-completion", command->bash, "Print the bash completion script");
    sub->add_flag("--zsh-completion", command->zsh, "Print the zsh completion script");
    sub->footer(
        "Examples:\n"
        "  gridwarp help modes\n"
        "  gridwarp help resample");
    return set_command_action(*sub, command, [&app](const HelpCommand& help) { run_help(app, help); });
}

}  // namespace gridwarp::cli
